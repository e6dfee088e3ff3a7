import {
  isSharedRootState,
  removeMissingOutputs,
  removeMissingOwnerOutputs,
  replacementMarker,
  replacementMarkers,
} from "@distributor/state";
import {
  isStorageError,
  joinPrefix,
  locatePath,
  type StorageBackend,
  type StorageEntry,
  statePath,
} from "@distributor/storage";
import { isWriteAction } from "../plan/action.js";
import { type PlanTargetOptions, planTarget, prepareOnce } from "../plan/plan-target.js";
import type { PublishPlan } from "../plan/plan-types.js";
import { compareAndSwapState } from "../protocol/commit-state.js";
import { holdLease } from "../protocol/hold-lease.js";
import type { Lease } from "../protocol/lease.js";
import { LeaseLostError, type LeaseOptions, readLeaseHolder } from "../protocol/lease-file.js";
import type { LeaseGuard } from "../protocol/lease-guard.js";
import { DEFAULT_DESTINATION_LIMITS, type DestinationLimit } from "../protocol/limits.js";
import { PendingDeletesError, UncommittedError } from "../protocol/pending.js";
import { type RecoveryReport, recoverJournal } from "../protocol/recovery.js";
import { encodeStateFile, encodeStateFileInSlices, isStateFile } from "../protocol/state-file.js";
import type { ExecuteContext } from "./context.js";
import { type Committed, executeEncodedPublish, StateChangedError } from "./execute.js";

/** How often a publication is planned again after another writer changed the state first. */
export const MAX_PUBLISH_ATTEMPTS = 3;

export interface PublishTargetOptions {
  plan: Omit<PlanTargetOptions, "now" | "prepare">;
  /** Time for each planning attempt's next state. */
  now: () => Date;
  dryRun: boolean;
  lease: LeaseOptions;
  execute: Omit<ExecuteContext, "source" | "sourceBundlePath" | "destination" | "lease" | "limits">;
  /** Called with each plan about to be carried out (or reported, for skips and refusals). */
  onPlan?: ((plan: PublishPlan) => void) | undefined;
  /**
   * Called once a write is decided, before the lease is taken (and in a dry run, before the
   * planned write is reported): the caller validates the source bundle in full here.
   */
  beforeWrite?: (() => Promise<void>) | undefined;
  onRecovered?: ((report: RecoveryReport) => void) | undefined;
  /**
   * Checks every final plan — one about to be reported, or carried out under the lease — before
   * anything of it is done; throwing refuses the publication. Applying a saved plan refuses here
   * whatever differs from the plan a reviewer approved.
   */
  approve?: ((plan: PublishPlan) => void) | undefined;
  /**
   * Under the lease, once a write plan is final and before anything of it is journaled or
   * written (again for each attempt): the release layout prepares its new release here.
   */
  beforeExecute?: ((plan: PublishPlan, lease: LeaseGuard) => Promise<void>) | undefined;
  /**
   * Under the lease, once a write plan's state is committed and its deletes are done: the
   * release layout switches `current` here. A failure fails the run, the publication standing.
   */
  afterCommit?: ((plan: PublishPlan, lease: LeaseGuard) => Promise<void>) | undefined;
}

/**
 * Plans and, for a write, commits one bundle at one destination under the commit protocol of
 * docs/design/commit-protocol.md: a skip reads the state alone and takes no lease (unless the state says a write is
 * under way, whose lease is then waited for or, when stale, recovered first); a refusal reads
 * the lease too; a write takes the state file's lease, plans again under it unless nothing
 * changed since, journals the paths it may create or will delete, marks the state (where one is
 * there) before its first write, executes, and releases. When the state
 * changed after planning the attempt is planned again, at most `MAX_PUBLISH_ATTEMPTS` times.
 * Returns the plan that was carried out.
 */
export async function publishTarget(options: PublishTargetOptions): Promise<PublishPlan> {
  const { destination, target } = options.plan;
  const bundlePath = target.bundlePath;
  const limits = options.plan.limits ?? DEFAULT_DESTINATION_LIMITS;
  const hold = (
    alongside?: (entries: Promise<readonly StorageEntry[]>) => Promise<void>,
    initialJournal?: PublishPlan["journal"],
  ) =>
    holdLease(destination, bundlePath, target.owner, {
      ...options.lease,
      signal: options.plan.signal,
      onRecovered: options.onRecovered,
      alongside,
      initialJournal,
      limits,
    });
  // Every attempt plans the same outputs: prepare (and render) them once.
  const prepare = prepareOnce(options.plan);
  const planOnce = () => planTarget({ ...options.plan, now: options.now(), prepare });
  let lease: Lease | undefined;
  // Under the lease, with any recovery done, a state that still says a replacement is under way
  // was left by a run whose lease went without a recovery (removed by hand, say): every record
  // the marker covers is looked at first, as recovery would, and the plan is made again.
  const sweepMarkers = async (planned: PublishPlan): Promise<PublishPlan> => {
    if (lease === undefined || !markedForAnyone(planned)) return planned;
    const signal = options.plan.signal;
    const report = await recoverJournal(destination, bundlePath, {
      journal: [],
      directories: [],
      signal,
      lease,
      limits,
    });
    options.onRecovered?.(report);
    const again = await planOnce();
    if (markedForAnyone(again)) {
      throw new Error(
        `${locatePath(destination.location, statePath(bundlePath))}: the state still carries a replacement marker after recovery; nothing was written`,
      );
    }
    return again;
  };
  const plan = async () => sweepMarkers(await planOnce());
  // A plan that is final — reported, or about to be carried out under the lease — is approved
  // first (saved plans refuse here whatever differs from what was reviewed), then reported. A
  // plan made without the lease that leads to a write is not final: it is made again under it.
  const settle = (planned: PublishPlan): PublishPlan => {
    options.approve?.(planned);
    options.onPlan?.(planned);
    return planned;
  };

  try {
    for (let attempt = 1; ; attempt++) {
      let current = await plan();
      if (lease === undefined && isSkip(current.action)) {
        // Decided from the state alone, read in one request (docs/design/bundles.md). A run writing for this
        // owner here (or one that died doing so) marked that state before its first write: then
        // its records may not describe what is stored, so the decision waits for that run, or
        // recovers what it left, and is made again under the lease. A dry run only reports.
        if (options.dryRun || !markedForOwner(current)) return settle(current);
        lease = await hold();
        current = await plan();
      } else if (lease === undefined && !isWriteAction(current.action)) {
        // A refusal, planned without the lease from the state and what is stored. The lease is
        // read after the state: a run part-way through a publication makes what is stored
        // differ from what that state records, so such a decision waits for that run or
        // recovers what it left, then plans again under the lease. A dry run only reports.
        if (!options.dryRun && (await leaseInTheWay(current, options))) {
          lease = await hold();
          current = await plan();
        } else if (
          (await unchangedSincePlanning(current, options)) ||
          attempt >= MAX_PUBLISH_ATTEMPTS
        ) {
          // Final only if no writer changed what it looked at (see `unchangedSincePlanning`).
          return settle(current);
        } else {
          // Otherwise plan again (under the lease, unless a dry run).
          if (options.dryRun) continue;
          lease = await hold();
          current = await plan();
        }
      }
      if (isWriteAction(current.action)) await options.beforeWrite?.();
      if (!isWriteAction(current.action)) return settle(current);
      if (options.dryRun) {
        // A dry run reports what the run would do: that includes refusing a state it could not
        // write (invalid, or too large to be read back).
        options.approve?.(current);
        await encodedNextState(destination, current, limits.stateBytes);
        options.onPlan?.(current);
        return current;
      }
      if (lease === undefined) {
        // What was planned without the lease may be stale by now. It stands when the lease was
        // free or released cleanly (nothing to recover) and the state is still the version it
        // read: every writer of these records holds this lease until it commits, and one that
        // gave it up cleanly left the destination as it was. Otherwise plan again under it.
        const planned = current;
        let unchanged = false;
        // The lease is created journaling what this plan may create: when the plan stands, the
        // journal step below has nothing left to write.
        lease = await hold(async (entries) => {
          // No state when planned: the listing the lease makes anyway says whether one came.
          unchanged =
            planned.stateVersion === undefined
              ? !(await entries).some((entry) => isStateFile(entry.path))
              : await unchangedSincePlanning(planned, options);
        }, planned.journal);
        current =
          unchanged && lease.broken === undefined ? await sweepMarkers(current) : await plan();
        if (!isWriteAction(current.action)) return settle(current);
      }
      options.approve?.(current);
      // Encoded before the journal: a state that cannot be written costs the destination nothing.
      const state = await encodedNextState(destination, current, limits.stateBytes);
      options.onPlan?.(current);
      const held = lease;
      await options.beforeExecute?.(current, held);
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
            limits,
          },
          current,
          state,
        );
        if (committed !== undefined) {
          await checkLateCommit(destination, held, current, committed, limits.stateBytes);
        }
        if (committed !== undefined) await options.afterCommit?.(current, held);
        return current;
      } catch (error) {
        if (error instanceof StateChangedError && attempt < MAX_PUBLISH_ATTEMPTS) continue;
        if (error instanceof UncommittedError) {
          // Abandoned, not released: the lease stays, expired, journaling what may be left and
          // what it replaced in place, so the next run recovers it (docs/design/commit-protocol.md, recovery completes).
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

/** A skip: decided from the state alone, and nothing to write. */
function isSkip(action: PublishPlan["action"]): boolean {
  return (
    action === "skip_same" ||
    action === "skip_destination_older" ||
    action === "skip_destination_newer"
  );
}

/** The state planning read says a run of the plan's owner is writing (or died writing) there. */
function markedForOwner(plan: PublishPlan): boolean {
  return (
    plan.readState !== undefined && replacementMarker(plan.readState, plan.ownerScope) !== undefined
  );
}

/** The state planning read says a run of some owner is writing (or died writing) there. */
function markedForAnyone(plan: PublishPlan): boolean {
  return plan.readState !== undefined && replacementMarkers(plan.readState).length > 0;
}

/**
 * True when a lease at the plan's bundle path keeps a refusal made without it from standing:
 * a stale one (a run died there, perhaps part-way through replacing recorded outputs: it is
 * recovered first), an unreadable one, or a live one of the same owner (its writer may be
 * replacing the very outputs the state records). A live lease of another owner of a shared root
 * is no reason: that owner never writes this owner's paths — except for a refusal over unmanaged
 * content, which looked at files any writer there changes.
 */
async function leaseInTheWay(plan: PublishPlan, options: PublishTargetOptions): Promise<boolean> {
  const { destination, signal, target } = options.plan;
  const holder = await readLeaseHolder(destination, plan.bundlePath, {
    signal,
    now: options.lease.now,
    processAlive: options.lease.processAlive,
  });
  if (holder === undefined) return false;
  if (holder.status !== "live" || holder.owner === undefined) return true;
  if (plan.action === "fail_unmanaged") return true;
  return (
    holder.owner.pipeline_id === target.owner.pipelineId &&
    holder.owner.destination_id === target.owner.destinationId
  );
}

/**
 * True when a plan made without the lease can stand: the state is still the version planning
 * read. Together with the lease read after that state (`leaseInTheWay`), this tells that no
 * writer of these records was part-way through when the state was read: one still there holds
 * the lease; one that finished since has changed the state. Taken with the lease held, it
 * tells that the plan made just before is still the one to carry out.
 */
async function unchangedSincePlanning(
  plan: PublishPlan,
  options: PublishTargetOptions,
): Promise<boolean> {
  const { destination, signal } = options.plan;
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
  limit: DestinationLimit,
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
  const bytes = encodeStateFile(destination, path, removal.state, limit);
  await compareAndSwapState(destination, path, bytes, committed.stateVersion, undefined).catch(
    () => undefined,
  );
  throw new LeaseLostError(
    `the state was committed after this run's lease had been taken over, and the run that took it over removed ${missing.length} of its outputs (${missing.slice(0, 5).join(", ")}); their records were dropped, so state and files agree — publish again with --repair`,
  );
}

/**
 * The bytes of a write plan's next state (see `encodeStateFile`), encoded in slices: it is done
 * under the lease, and a big state takes seconds to encode.
 */
async function encodedNextState(
  destination: StorageBackend,
  plan: PublishPlan,
  limit: DestinationLimit,
): Promise<Uint8Array> {
  if (plan.nextState === undefined) {
    throw new Error(`publish plan ${plan.action} for ${plan.bundlePath} has no next state`);
  }
  return encodeStateFileInSlices(destination, statePath(plan.bundlePath), plan.nextState, limit);
}
