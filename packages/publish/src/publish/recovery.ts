import type { OwnerScope } from "@distributor/state";
import {
  isStorageError,
  isTempFileFor,
  isTempFileName,
  joinPrefix,
  LEASE_FILE_NAME,
  relativeTo,
  STATE_FILE_NAME,
  type StorageBackend,
} from "@distributor/storage";
import { acquireLease, type Lease, type LeaseOptions } from "./lease.js";
import { readDestinationStatus } from "./state-file.js";

/** What recovering a stale lease removed. */
export interface RecoveryReport {
  /** Journaled paths no state records (bundle-relative), deleted. */
  deleted: string[];
  /** Temp files of the reserved pattern found in the journaled directories, deleted. */
  tempFiles: string[];
  /** Journaled paths kept because the state records them, or the state could not be read. */
  kept: string[];
}

/**
 * Undoes what a run that died while holding the lease left behind (SPEC §5): the journaled paths
 * that no state records, and reserved-pattern temp files in the directories it wrote to. Nothing
 * else is touched — never an unmanaged entry. When the state cannot be read, nothing journaled is
 * deleted (what it records cannot be known), only temp files.
 */
export async function recoverJournal(
  backend: StorageBackend,
  bundlePath: string,
  journal: readonly string[],
  directories: readonly string[],
  signal?: AbortSignal,
): Promise<RecoveryReport> {
  const { status } = await readDestinationStatus(backend, bundlePath, signal);
  const report: RecoveryReport = { deleted: [], tempFiles: [], kept: [] };
  // Every owner's records count: a shared root's other owners' paths are never removed.
  const recorded = new Set((status.state?.outputs ?? []).map((output) => output.path));
  const readable = status.stateError === undefined;
  for (const path of new Set(journal)) {
    if (path === STATE_FILE_NAME || path === LEASE_FILE_NAME) continue;
    if (!readable || recorded.has(path)) report.kept.push(path);
    else report.deleted.push(path);
  }
  await deleteEach(backend, bundlePath, report.deleted, signal);

  for (const directory of new Set(["", ...directories])) {
    report.tempFiles.push(...(await tempFilesIn(backend, bundlePath, directory, signal)));
  }
  await deleteEach(backend, bundlePath, report.tempFiles, signal);
  return report;
}

/** A lease write takes milliseconds; its temp file this old was left by a killed process. */
const STALE_LEASE_TEMP_MS = 60_000;

/**
 * Reserved-pattern temp files directly in one directory (bundle-relative paths), except those of
 * the lease file: other runs write them while trying to take the lease, so only old ones count.
 */
async function tempFilesIn(
  backend: StorageBackend,
  bundlePath: string,
  directory: string,
  signal: AbortSignal | undefined,
): Promise<string[]> {
  const entries = await backend.walk(joinPrefix(bundlePath, directory), { limit: 100_000, signal });
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
async function deleteEach(
  backend: StorageBackend,
  bundlePath: string,
  paths: readonly string[],
  signal: AbortSignal | undefined,
): Promise<void> {
  if (paths.length === 0) return;
  const options = { ignoreMissing: true, pruneEmptyDirs: true, signal };
  try {
    await backend.deleteManagedOutputs(bundlePath, paths, options);
  } catch (error) {
    if (!isStorageError(error, "unsupported")) throw error;
    for (const path of paths) {
      await backend.deleteManagedOutputs(bundlePath, [path], options).catch((failure: unknown) => {
        if (!isStorageError(failure, "unsupported")) throw failure;
      });
    }
  }
}

/**
 * Takes the lease of the state at `bundlePath`, recovering first what a dead holder left (its
 * journal), then empties the journal. Temp files of the reserved pattern directly in the bundle
 * path (a lease or state write killed half-way, perhaps before any journal existed) are removed
 * whenever the lease is taken: while it is held nobody else writes there. The returned lease is
 * held until `release`.
 */
export async function holdLease(
  backend: StorageBackend,
  bundlePath: string,
  owner: OwnerScope,
  options: LeaseOptions & { onRecovered?: (report: RecoveryReport) => void } = {},
): Promise<Lease> {
  const lease = await acquireLease(backend, bundlePath, owner, options);
  try {
    const leftovers = await tempFilesIn(backend, bundlePath, "", options.signal);
    await deleteEach(backend, bundlePath, leftovers, options.signal);
    if (lease.broken !== undefined) {
      const report = await recoverJournal(
        backend,
        bundlePath,
        lease.broken.journal,
        lease.broken.directories,
        options.signal,
      );
      await lease.clearJournal();
      options.onRecovered?.(report);
    }
    return lease;
  } catch (error) {
    await lease.release();
    throw error;
  }
}

/** True when a lease file (live or stale) lies beside the state at `bundlePath`. */
export async function leasePresent(
  backend: StorageBackend,
  bundlePath: string,
  signal?: AbortSignal,
): Promise<boolean> {
  try {
    await backend.stat(joinPrefix(bundlePath, LEASE_FILE_NAME), { signal });
    return true;
  } catch (error) {
    if (isStorageError(error, "not_found")) return false;
    throw error;
  }
}
