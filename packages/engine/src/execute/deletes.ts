import type { StateDocument } from "@distributor/state";
import { isStorageError, joinPrefix } from "@distributor/storage";
import type { PublishPlan } from "../plan/plan-types.js";
import { PendingDeletesError } from "../protocol/pending.js";
import { type ExecuteContext, PublishExecutionError, type WriteOutcome } from "./context.js";

// The executor's deletes: replaced outputs before or after the writes, and what a failed attempt created.

/** Step: managed outputs standing where new outputs need a directory go first (fenced). */
export async function deleteFirst(context: ExecuteContext, plan: PublishPlan): Promise<void> {
  if (plan.deletesFirst.length === 0) return;
  context.lease?.assertHeld();
  await context.destination.deletePaths(plan.bundlePath, plan.deletesFirst, {
    ignoreMissing: true,
    pruneEmptyDirs: true,
    signal: context.signal,
    ifMatch: fence(plan.deletesFirst, plan.deleteVersions),
  });
}

/**
 * Step, after a failure before the commit: removes the outputs this attempt is known to have
 * created, each fenced on the version it wrote. Returns what may remain: the uncertain creates,
 * and the created ones it could not (or, after losing its lease, may not) remove.
 */
export async function undoCreated(
  context: ExecuteContext,
  bundlePath: string,
  outcome: WriteOutcome,
): Promise<string[]> {
  const pending = [...outcome.uncertain];
  const created = [...outcome.created.keys()];
  if (created.length === 0) return pending;
  const held =
    context.lease === undefined ||
    (await context.lease.confirm().then(
      () => true,
      () => false,
    ));
  // After a takeover the new holder's recovery decides what of this attempt goes, except what
  // this attempt created after it: a version unique to this write (not derived from the bytes
  // alone) proves the file is still exactly the one it created, which no state can record.
  if (!held && context.destination.versionsMayRepeat) return [...pending, ...created];
  try {
    await context.destination.deletePaths(bundlePath, created, {
      ignoreMissing: true,
      pruneEmptyDirs: true,
      ifMatch: outcome.created,
    });
    return pending;
  } catch {
    return [...pending, ...created];
  }
}

/**
 * Step: deletes what the new state no longer records, each fenced on the version planning saw,
 * or, for a forced replacement, everything below the bundle path but the kept paths.
 */
export async function deleteAfter(
  context: ExecuteContext,
  plan: PublishPlan & { nextState: StateDocument },
): Promise<void> {
  const { destination, signal } = context;
  const cleaning = plan.clearBundlePath || plan.deletes.length > 0;
  if (!cleaning) return;
  context.onCleanupStart?.(plan.clearBundlePath ? null : plan.deletes.length);
  const options = { ignoreMissing: true, pruneEmptyDirs: true, signal };
  try {
    context.lease?.assertHeld();
    if (plan.clearBundlePath) {
      await destination.deletePrefix(plan.bundlePath, { ...options, keep: plan.keep });
    } else {
      await deleteRetired(context, plan);
    }
  } catch (error) {
    if (error instanceof PendingDeletesError) throw error;
    if (isStorageError(error, "conflict")) {
      // Changed since planning, and this run could not prove it still holds the lease: a newer
      // run may record those bytes, so they are not this run's to delete.
      throw new PublishExecutionError(
        `published, but ${error.path} changed since it was planned and was left in place: ${error.message}`,
        { cause: error },
      );
    }
    throw new PendingDeletesError(
      `published, but removing the outputs it replaced failed: ${(error as Error).message}; the next run removes them`,
      plan.clearBundlePath ? plan.journal.paths : plan.deletes,
      { cause: error },
    );
  }
  context.onCleanupDone?.();
}

/**
 * Deletes the outputs the committed state no longer records, fenced on the versions planning saw.
 * A path whose version moved meanwhile was written by a run that had lost its lease (a write
 * issued before it stalled and landed after), or edited by hand: once this run proves it still
 * holds the lease (a compare-and-swap of it), no state records those bytes — the one it just
 * committed does not, and no newer one exists — so it deletes them, fenced on the version it
 * reads now. Without that proof it leaves them.
 */
export async function deleteRetired(context: ExecuteContext, plan: PublishPlan): Promise<void> {
  const { destination, signal } = context;
  const options = { ignoreMissing: true, pruneEmptyDirs: true, signal };
  try {
    await destination.deletePaths(plan.bundlePath, plan.deletes, {
      ...options,
      ifMatch: fence(plan.deletes, plan.deleteVersions),
    });
    return;
  } catch (error) {
    if (!isStorageError(error, "conflict") || context.lease === undefined) throw error;
    const held = await context.lease.confirm().then(
      () => true,
      () => false,
    );
    // Not provably held: leave the moved path, and keep every retired one journaled for the
    // next run (a lease that was taken over refuses the journal write, harmlessly).
    if (!held) throw new PendingDeletesError(error.message, plan.deletes, { cause: error });
  }
  // Held: every path still there goes, each at the version it holds now.
  const current = new Map<string, string>();
  for (const path of plan.deletes) {
    try {
      const { version } = await destination.stat(joinPrefix(plan.bundlePath, path), { signal });
      if (version !== undefined) current.set(path, version);
    } catch (error) {
      if (!isStorageError(error, "not_found")) throw error;
    }
  }
  context.lease.assertHeld();
  await destination.deletePaths(plan.bundlePath, [...current.keys()], {
    ...options,
    ifMatch: current,
  });
}

export function fence(
  paths: readonly string[],
  versions: Readonly<Record<string, string>>,
): Map<string, string> {
  const fenced = new Map<string, string>();
  for (const path of paths) {
    const version = versions[path];
    if (version !== undefined) fenced.set(path, version);
  }
  return fenced;
}
