import { type LeaseReport, readLease } from "@distributor/engine";
import {
  compareLogicalPaths,
  displayPath,
  joinPrefix,
  LEASE_FILE_NAME,
  STATE_FILE_NAME,
  type StorageBackend,
} from "@distributor/storage";

/** A lease found where no state file is: an interrupted first publication (or one under way). */
export interface LeaseWithoutState {
  /** Destination bundle path (`.` for the root). */
  bundle_path: string;
  lease: LeaseReport;
}

/**
 * Leases in `entries` (a listing from the destination root) with no state file beside them: a
 * first publication holds one until its state is written, and a killed one leaves it (and the
 * outputs it wrote) for the next run's recovery. Unreadable leases are reported by what can be
 * read of them.
 */
export async function leasesWithoutState(
  backend: StorageBackend,
  entries: readonly { path: string; kind: string }[],
  signal: AbortSignal | undefined,
): Promise<LeaseWithoutState[]> {
  const files = new Set(entries.filter((e) => e.kind === "file").map((e) => e.path));
  const found: LeaseWithoutState[] = [];
  for (const path of [...files].sort(compareLogicalPaths)) {
    const name = path.slice(path.lastIndexOf("/") + 1);
    if (name !== LEASE_FILE_NAME) continue;
    const bundlePath = path.slice(0, Math.max(0, path.length - LEASE_FILE_NAME.length - 1));
    if (files.has(joinPrefix(bundlePath, STATE_FILE_NAME))) continue;
    const lease = await readLease(backend, bundlePath, signal);
    if (lease !== undefined) found.push({ bundle_path: displayPath(bundlePath), lease });
  }
  return found;
}
