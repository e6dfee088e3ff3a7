import type { OwnerScope } from "@distributor/state";
import type { StorageBackend, StorageEntry } from "@distributor/storage";
import { acquireLease } from "./acquire-lease.js";
import type { Lease } from "./lease.js";
import type { LeaseOptions } from "./lease-file.js";
import { type RecoveryReport, recoverJournal } from "./recovery.js";
import { deleteEach, listDirectory, tempFiles } from "./recovery-cleanup.js";

// holdLease: the one way to hold a state file's lease, recovering a dead holder's journal first.

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
  options: LeaseOptions & {
    onRecovered?: (report: RecoveryReport) => void;
    /**
     * Runs once the lease is taken, beside the sweep of temp files (one round trip instead of
     * two on a remote store), with the listing of the bundle path's own entries that the sweep
     * makes; its failure fails the taking, and the lease is released.
     */
    alongside?: ((entries: Promise<readonly StorageEntry[]>) => Promise<void>) | undefined;
  } = {},
): Promise<Lease> {
  const lease = await acquireLease(backend, bundlePath, owner, options);
  try {
    const listing = listDirectory(backend, bundlePath, "", options.signal, options.limits?.entries);
    listing.catch(() => undefined);
    const [entries] = await Promise.all([listing, options.alongside?.(listing)]);
    await deleteEach(backend, bundlePath, tempFiles(bundlePath, entries), options.signal);
    if (lease.broken !== undefined) {
      const report = await recoverJournal(backend, bundlePath, {
        journal: lease.broken.journal,
        directories: lease.broken.directories,
        overwrites: lease.broken.overwrites,
        brokenRunId: lease.broken.lease?.run_id,
        signal: options.signal,
        lease,
        limits: options.limits,
      });
      await lease.clearJournal();
      options.onRecovered?.(report);
    }
    return lease;
  } catch (error) {
    // Recovery did not finish: keep the dead run's journal (in an already expired lease) for
    // the next run, rather than releasing and forgetting it.
    const broken = lease.broken;
    if (broken === undefined) await lease.release();
    else await lease.abandon(lease.journaled);
    throw error;
  }
}
