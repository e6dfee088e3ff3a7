import {
  isStorageError,
  isTempFileFor,
  isTempFileName,
  joinPrefix,
  LEASE_FILE_NAME,
  relativeTo,
  type StorageBackend,
  type StorageEntry,
} from "@distributor/storage";
import { DEFAULT_DESTINATION_LIMITS, type DestinationLimit, walkWithin } from "./limits.js";

// What recovery removes besides records: temp files, journaled paths, directories left empty.

/** True when `path` is within the backend's path limit (`StorageBackend.maxPathBytes`). */
export function fitsBackend(backend: StorageBackend, path: string): boolean {
  const limit = backend.maxPathBytes;
  return limit === undefined || path.length <= limit / 3 || Buffer.byteLength(path) <= limit;
}

export function parentOf(path: string): string {
  const slash = path.lastIndexOf("/");
  return slash === -1 ? "" : path.slice(0, slash);
}

/**
 * Removes journaled directories (and their parents below the bundle path) that hold nothing:
 * directories a killed attempt created before any file of its own landed in them. Deepest first,
 * so a chain of empty directories goes as a whole; anything with content stays.
 */
export async function removeEmptyDirectories(
  backend: StorageBackend,
  bundlePath: string,
  directories: readonly string[],
  signal: AbortSignal | undefined,
): Promise<void> {
  const candidates = new Set<string>();
  for (const directory of directories) {
    for (let dir = directory; dir !== ""; dir = parentOf(dir)) candidates.add(dir);
  }
  const deepestFirst = [...candidates].sort(
    (a, b) => b.split("/").length - a.split("/").length || (a < b ? -1 : 1),
  );
  for (const directory of deepestFirst) {
    const path = joinPrefix(bundlePath, directory);
    let kind: string;
    try {
      kind = (await backend.stat(path, { signal })).kind;
    } catch (error) {
      if (isStorageError(error, "not_found")) continue;
      throw error;
    }
    if (kind !== "directory" || (await backend.hasAny(path, { signal }))) continue;
    await backend.deletePrefix(path, { ignoreMissing: true, signal });
  }
}

/** Direct children of one directory below the bundle path (at most `limit`); none when it is missing. */
export async function listDirectory(
  backend: StorageBackend,
  bundlePath: string,
  directory: string,
  signal: AbortSignal | undefined,
  limit: DestinationLimit = DEFAULT_DESTINATION_LIMITS.entries,
): Promise<StorageEntry[]> {
  return walkWithin(backend, joinPrefix(bundlePath, directory), limit, { signal });
}

/** A lease write takes milliseconds; its temp file this old was left by a killed process. */
export const STALE_LEASE_TEMP_MS = 60_000;

/**
 * Reserved-pattern temp files among listed entries (bundle-relative paths), except those of the
 * lease file: other runs write them while trying to take the lease, so only old ones count.
 */
export function tempFiles(bundlePath: string, entries: readonly StorageEntry[]): string[] {
  const now = Date.now();
  return entries
    .filter((entry) => {
      const name = entry.path.slice(entry.path.lastIndexOf("/") + 1);
      if (entry.kind !== "file" || entry.nameProblem !== undefined || !isTempFileName(name)) {
        return false;
      }
      if (!isTempFileFor(name, LEASE_FILE_NAME)) return true;
      const age = now - (entry.modifiedAt?.getTime() ?? now);
      return age > STALE_LEASE_TEMP_MS;
    })
    .map((entry) => relativeTo(bundlePath, entry.path));
}

/** Deletes in one batch; a batch refused as a whole (a path became a directory) goes one by one. */
export async function deleteEach(
  backend: StorageBackend,
  bundlePath: string,
  paths: readonly string[],
  signal: AbortSignal | undefined,
  ifMatch?: ReadonlyMap<string, string>,
): Promise<void> {
  if (paths.length === 0) return;
  const options = { ignoreMissing: true, pruneEmptyDirs: true, signal };
  // A path whose version moved since it was listed is not the dead run's any more: it stays.
  const tolerated = (failure: unknown) =>
    isStorageError(failure, "unsupported") || isStorageError(failure, "conflict");
  try {
    await backend.deletePaths(bundlePath, paths, { ...options, ifMatch });
  } catch (error) {
    if (!tolerated(error)) throw error;
    for (const path of paths) {
      const version = ifMatch?.get(path);
      const fenced = version === undefined ? undefined : new Map([[path, version]]);
      await backend
        .deletePaths(bundlePath, [path], { ...options, ifMatch: fenced })
        .catch((failure: unknown) => {
          if (!tolerated(failure)) throw failure;
        });
    }
  }
}
