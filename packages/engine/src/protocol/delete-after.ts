import { isStorageError, joinPrefix, mapBounded, type StorageBackend } from "@distributor/storage";
import type { Lease } from "./lease.js";

// A state transaction's delete-after step: paths its committed state no longer records, deleted one
// at a time, each fenced on the version seen before the journal (docs/design/commit-protocol.md).

/** Parallel `stat` calls while reading the versions the deletes are fenced on. */
const STAT_CONCURRENCY = 8;

/**
 * What was stored at a path before the journal: `missing`, or a file with the version token its
 * delete is fenced on (none from a backend that gave the file no token).
 */
export type StoredVersion = { missing: true } | { missing: false; version: string | undefined };

/** What is stored at `paths` of `bundlePath`, one entry for each path. */
export async function storedVersions(
  backend: StorageBackend,
  bundlePath: string,
  paths: readonly string[],
  signal: AbortSignal | undefined,
): Promise<Map<string, StoredVersion>> {
  const found = await mapBounded(paths, STAT_CONCURRENCY, async (path): Promise<StoredVersion> => {
    try {
      const { version } = await backend.stat(joinPrefix(bundlePath, path), { signal });
      return { missing: false, version };
    } catch (error) {
      if (isStorageError(error, "not_found")) return { missing: true };
      throw error;
    }
  });
  return new Map(paths.map((path, index) => [path, found[index] as StoredVersion]));
}

/**
 * Deletes `paths` of `bundlePath` one at a time, each fenced on the version seen before the
 * journal (`versions`). One that was missing then has nothing of this transaction's to delete: it
 * is not touched (an unfenced delete could remove what a run that took over since wrote there and
 * records) and counts as deleted. One rewritten since is deleted at its current version only while
 * `lease` is proven held (no state records those bytes then); without that proof it stays and is
 * returned. Any other failure, an interruption included, throws what `failure` makes of it.
 */
export async function deleteFenced(
  backend: StorageBackend,
  lease: Lease,
  bundlePath: string,
  paths: readonly string[],
  versions: ReadonlyMap<string, StoredVersion>,
  signal: AbortSignal | undefined,
  failure: (path: string, error: unknown) => Error,
  deleted: (path: string) => void,
): Promise<string[]> {
  const kept: string[] = [];
  for (const path of paths) {
    const stored = versions.get(path);
    if (stored === undefined || stored.missing) {
      // Already gone before the journal: as deleted as one deleted now, and nothing here to fence
      // a delete on. (Not read at all: never deleted blind either.)
      deleted(path);
      continue;
    }
    try {
      signal?.throwIfAborted();
      lease.assertHeld();
      const { version } = stored;
      await backend.deletePaths(bundlePath, [path], {
        // A path already gone is as deleted as one deleted now.
        ignoreMissing: true,
        pruneEmptyDirs: true,
        ...(version === undefined ? {} : { ifMatch: new Map([[path, version]]) }),
      });
    } catch (error) {
      if (isStorageError(error, "conflict")) {
        // Rewritten since the journal. With the lease proven held, no state records those bytes
        // (the one just committed no longer does): delete them at the version they hold now.
        // Without that proof, a newer run may record them: they stay.
        if (await deleteAtCurrentVersion(backend, lease, bundlePath, path, signal)) {
          deleted(path);
        } else {
          kept.push(path);
        }
        continue;
      }
      throw failure(path, error);
    }
    deleted(path);
  }
  return kept;
}

/** Deletes `path` at whatever version it holds now, only while `lease` is provably held. */
async function deleteAtCurrentVersion(
  backend: StorageBackend,
  lease: Lease,
  bundlePath: string,
  path: string,
  signal: AbortSignal | undefined,
): Promise<boolean> {
  try {
    await lease.confirm();
    const { version } = await backend.stat(joinPrefix(bundlePath, path), { signal });
    lease.assertHeld();
    await backend.deletePaths(bundlePath, [path], {
      ignoreMissing: true,
      pruneEmptyDirs: true,
      ...(version === undefined ? {} : { ifMatch: new Map([[path, version]]) }),
    });
    return true;
  } catch (error) {
    if (isStorageError(error, "not_found")) return true;
    return false;
  }
}
