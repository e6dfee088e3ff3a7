import {
  isSharedRootState,
  removeMissingOutputs,
  removeMissingOwnerOutputs,
} from "@distributor/state";
import { isStorageError, joinPrefix, type StorageBackend, statePath } from "@distributor/storage";
import { isWriteAction } from "./action.js";
import { compareAndSwapState } from "./commit-state.js";
import {
  type Committed,
  type ExecuteContext,
  executeEncodedPublish,
  PendingDeletesError,
  StateChangedError,
  UncommittedError,
} from "./execute.js";
import { type Lease, LeaseLostError, type LeaseOptions, leaseStatus } from "./lease.js";
import type { PublishPlan } from "./plan.js";
import { type PlanTargetOptions, planTarget, prepareOnce } from "./plan-target.js";
import { holdLease, leasePresent, type RecoveryReport } from "./recovery.js";
import { encodeStateFile } from "./state-file.js";

/** How often a publication is planned again after another writer changed the state first. */
export const MAX_PUBLISH_ATTEMPTS = 3;

export interface PublishTargetOptions {
  plan: Omit<PlanTargetOptions, "now" | "prepare">;
  /** Time for each planning attempt's next state. */
  now: () => Date;
  dryRun: boolean;
  lease: LeaseOptions;
  execute: Omit<ExecuteContext, "source" | "sourceBundlePath" | "destination" | "lease">;
  /** Called with each plan about to be carried out (or reported, for skips and refusals). */
  onPlan?: ((plan: PublishPlan) => void) | undefined;
  /**
   * Called once a write is decided, before the lease is taken (and in a dry run, before the
   * planned write is reported): the caller validates the source bundle in full here.
   */
  beforeWrite?: (() => Promise<void>) | undefined;
  onRecovered?: ((report: RecoveryReport) => void) | undefined;
  /**
   * Checks every plan as soon as it is made, before it is reported or carried out (with or
   * without the lease); throwing refuses the publication. Applying a saved plan refuses here
   * whatever differs from the plan a reviewer approved.
   */
  approve?: ((plan: PublishPlan) => void) | undefined;
}

/**
 * Plans and, for a write, commits one bundle at one destination under the commit protocol of
 * SPEC §5: a skip or refusal reads and takes no lease (unless a lease is already there, which is
 * waited for or, when stale, recovered first); a write takes the state file's lease, plans again
 * under it, journals the paths it may create or will delete, executes, and releases. When the
 * state changed after planning the attempt is planned again, at most `MAX_PUBLISH_ATTEMPTS`
 * times. Returns the plan that was carried out.
 */
export async function publishTarget(options: PublishTargetOptions): Promise<PublishPlan> {
  const { destination, target } = options.plan;
  const bundlePath = target.bundlePath;
  const hold = () =>
    holdLease(destination, bundlePath, target.owner, {
      ...options.lease,
      signal: options.plan.signal,
      onRecovered: options.onRecovered,
    });
  // Every attempt plans the same outputs: prepare (and render) them once.
  const prepare = prepareOnce(options.plan);
  const plan = async () => {
    const planned = await planTarget({ ...options.plan, now: options.now(), prepare });
    options.approve?.(planned);
    return planned;
  };

  let lease: Lease | undefined;
  try {
    // A stale lease means a run died here: recover before planning. A live one is waited for
    // only if this turns out to be a write; a skip takes no lease (SPEC §5).
    if (
      !options.dryRun &&
      (await leaseStatus(destination, bundlePath, {
        signal: options.plan.signal,
        now: options.lease.now,
        processAlive: options.lease.processAlive,
      })) === "stale"
    ) {
      lease = await hold();
    }
    for (let attempt = 1; ; attempt++) {
      let current = await plan();
      if (lease === undefined && !isWriteAction(current.action)) {
        // Planned without the lease: final only if no writer changed what it looked at (see
        // `unchangedSincePlanning`). Otherwise plan again (under the lease, unless a dry run).
        if ((await unchangedSincePlanning(current, options)) || attempt >= MAX_PUBLISH_ATTEMPTS) {
          options.onPlan?.(current);
          return current;
        }
        if (options.dryRun) continue;
        lease = await hold();
        current = await plan();
      }
      if (isWriteAction(current.action)) await options.beforeWrite?.();
      if (!isWriteAction(current.action)) {
        options.onPlan?.(current);
        return current;
      }
      if (options.dryRun) {
        // A dry run reports what the run would do: that includes refusing a state it could not
        // write (invalid, or too large to be read back).
        encodedNextState(destination, current);
        options.onPlan?.(current);
        return current;
      }
      if (lease === undefined) {
        lease = await hold();
        // What was planned without the lease may be stale by now.
        current = await plan();
        if (!isWriteAction(current.action)) {
          options.onPlan?.(current);
          return current;
        }
      }
      // Encoded before the journal: a state that cannot be written costs the destination nothing.
      const state = encodedNextState(destination, current);
      options.onPlan?.(current);
      const held = lease;
      // Step journal: what this attempt may create or will delete, recorded before its first write.
      const { paths, directories, overwrites } = current.journal;
      await held.journal(paths, directories, overwrites);
      try {
        // Steps write → confirm → compare-and-swap state → delete-after.
        const committed = await executeEncodedPublish(
          {
            ...options.execute,
            source: options.plan.source,
            sourceBundlePath: options.plan.sourceBundlePath,
            destination,
            lease: held,
          },
          current,
          state,
        );
        if (committed !== undefined) await checkLateCommit(destination, held, current, committed);
        return current;
      } catch (error) {
        if (error instanceof StateChangedError && attempt < MAX_PUBLISH_ATTEMPTS) continue;
        if (error instanceof UncommittedError) {
          // Abandoned, not released: the lease stays, expired, journaling what may be left and
          // what it replaced in place, so the next run recovers it (SPEC §5, recovery completes).
          lease = undefined;
          await held.abandon(error.pending);
        } else if (error instanceof PendingDeletesError) {
          // Committed: only the deletes are left; the state describes every replaced path.
          lease = undefined;
          await held.abandon(error.pending, []);
        }
        throw error;
      }
    }
  } finally {
    await lease?.release();
  }
}

/**
 * True when a plan made without the lease can stand. A decision from the state alone (a skip, a
 * conflict) needs only the state to be the version planning read. A refusal for unmanaged
 * content also looked at the files, which a writer changes while it holds the lease: it stands
 * only with no lease present either — a writer holds the lease for as long as it writes and
 * changes the state when it commits.
 */
async function unchangedSincePlanning(
  plan: PublishPlan,
  options: PublishTargetOptions,
): Promise<boolean> {
  const { destination, signal } = options.plan;
  if (
    plan.action === "fail_unmanaged" &&
    (await leasePresent(destination, plan.bundlePath, signal))
  ) {
    return false;
  }
  try {
    const { version } = await destination.stat(statePath(plan.bundlePath), { signal });
    return version === plan.stateVersion;
  } catch (error) {
    if (isStorageError(error, "not_found")) return plan.stateVersion === undefined;
    throw error;
  }
}

/**
 * A commit that landed after this run had lost its lease (it stalled at the state write, past
 * the lease, and the run that took over recovered the journal — removing the outputs no state
 * recorded yet, where no state existed to fence the commit): the state may now record outputs
 * that are gone. Each written output is looked at; the records of missing ones are dropped with
 * a compare-and-swap on the version this run just wrote (so a newer state is never touched), and
 * the run fails, saying so. With every output there, the commit stands.
 */
async function checkLateCommit(
  destination: StorageBackend,
  lease: Lease,
  plan: PublishPlan,
  committed: Committed,
): Promise<void> {
  try {
    lease.assertHeld();
    return;
  } catch {
    // Lost: look at what the commit describes.
  }
  const missing: string[] = [];
  for (const write of plan.writes) {
    try {
      await destination.stat(joinPrefix(plan.bundlePath, write.output.path));
    } catch (error) {
      if (!isStorageError(error, "not_found")) throw error;
      missing.push(write.output.path);
    }
  }
  if (missing.length === 0 || plan.nextState === undefined) return;
  const document = plan.nextState;
  const removal = isSharedRootState(document)
    ? removeMissingOwnerOutputs(document, plan.ownerScope, missing)
    : removeMissingOutputs(document, missing);
  const path = statePath(plan.bundlePath);
  const bytes = encodeStateFile(destination, path, removal.state);
  await compareAndSwapState(destination, path, bytes, committed.stateVersion, undefined).catch(
    () => undefined,
  );
  throw new LeaseLostError(
    `the state was committed after this run's lease had been taken over, and the run that took it over removed ${missing.length} of its outputs (${missing.slice(0, 5).join(", ")}); their records were dropped, so state and files agree — publish again with --repair`,
  );
}

/** The bytes of a write plan's next state (see `encodeStateFile`). */
function encodedNextState(destination: StorageBackend, plan: PublishPlan): Uint8Array {
  if (plan.nextState === undefined) {
    throw new Error(`publish plan ${plan.action} for ${plan.bundlePath} has no next state`);
  }
  return encodeStateFile(destination, statePath(plan.bundlePath), plan.nextState);
}
