import { newReleaseId, parseDocument, replacementMarkers } from "@distributor/state";
import { isStorageError, statePath } from "@distributor/storage";
import { type PublishTargetOptions, publishTarget } from "../execute/commit.js";
import { isWriteAction } from "../plan/action.js";
import type { PublishPlan } from "../plan/plan-types.js";
import { holdLease } from "../protocol/hold-lease.js";
import { LeaseHeldError } from "../protocol/lease-file.js";
import { DEFAULT_DESTINATION_LIMITS } from "../protocol/limits.js";
import { checkRelease, releaseIntact } from "./identities.js";
import { linksOf } from "./layout.js";
import { ReleaseRefusedError } from "./refused.js";
import {
  finishRelease,
  prepareRelease,
  releaseDirectoryExists,
  releasesToRetire,
  retainReleases,
  snapshotExists,
} from "./releases.js";
import { rollbackRelease } from "./rollback.js";
import { commitStaged, stagedAsConfigured, stagedOfSource } from "./staged.js";
import { StagingView } from "./staging-view.js";
import { ReleaseView } from "./view.js";

export interface ReleaseLayout {
  /** Committed releases kept, the one in force among them (`releases.keep`). */
  keep: number;
  /**
   * The id of the release to build; default a new one. Applying a saved plan builds the release
   * its next state names, so that the state it writes is the one reviewed.
   */
  id?: string | undefined;
  /**
   * Called, once the publication is committed, with the files of the previous release that had
   * changed since it was committed (edited in place): the new release holds them written again
   * from the source instead of linked.
   */
  onRewritten?: ((paths: readonly string[]) => void) | undefined;
  /**
   * Called when retention fails after the new release went live (or was staged); without it,
   * such a failure fails the publication (which stands: committed, and switched unless staged).
   */
  onRetentionFailed?: ((error: unknown) => void) | undefined;
  /**
   * Called when the release the state recorded had lost its directory: the run published its
   * files again as release `next` (or, in a dry run, would).
   */
  onRecordedMissing?: ((recorded: string, next: string) => void) | undefined;
  /**
   * Stage the release instead of making it live (docs/design/releases.md, staged releases): it is
   * committed by its snapshot; the live state and `current` stay as they are.
   */
  stage?: boolean | undefined;
  /** Staged releases retention keeps (`releases.keep_staged`); all when undefined. */
  keepStaged?: number | undefined;
  /** Called once the release `id` is staged (committed, not live). */
  onStaged?: ((id: string) => void) | undefined;
  /**
   * Called when a run (not staging) found the source it publishes staged as release `id` and
   * made that release live instead of writing it again.
   */
  onPromoted?: ((id: string) => void) | undefined;
  /**
   * Called when such a staged release could not be made live (it changed since it was staged):
   * the run publishes the source as a new release instead.
   */
  onPromotionRefused?: ((id: string, error: ReleaseRefusedError) => void) | undefined;
  /**
   * Called when release `id` staged this source under another configuration (a plan against its
   * snapshot does not skip): the run does not reuse or promote it, and publishes (or stages) the
   * source afresh.
   */
  onStagedOutdated?: ((id: string) => void) | undefined;
  /**
   * Whether a run (not staging) of a source that is staged makes that release live instead of
   * writing it again; default true. False when applying a saved plan (which carries out exactly
   * the plan reviewed) and when saving one (`run --plan-out`): neither promotes.
   */
  promoteStaged?: boolean | undefined;
}

/**
 * `publishTarget` under the release layout (docs/design/releases.md): the publication is built
 * in a new release directory — a hard-linked copy of the release the state records, then the
 * plan's writes and deletes — committed by the state, then made live by switching `current`.
 * Readers of `current` see the old release or the new one, never a mix; the release in force is
 * never written. Retention then removes the oldest committed releases beyond `layout.keep`.
 */
export async function publishRelease(
  options: PublishTargetOptions,
  layout: ReleaseLayout,
): Promise<PublishPlan> {
  const { destination, target, signal } = options.plan;
  const bundlePath = target.bundlePath;
  linksOf(destination, bundlePath);
  // A state recording a release whose directory is gone promises files that are not there: the
  // run publishes them again (as a repair of the records' source, or with the new source), into a
  // release of its own, rather than skipping — or switching `current` to nothing.
  const recorded = await new ReleaseView(destination, bundlePath).stateRelease(signal);
  const gone =
    recorded !== undefined &&
    !(await releaseDirectoryExists(destination, bundlePath, recorded, signal));
  if (!options.dryRun && !gone) await settlePendingSwitch(options, layout);
  if (!layout.stage && layout.promoteStaged !== false && layout.id === undefined)
    await promoteStagedSource(options, layout);
  const next = layout.id ?? newReleaseId(options.now());
  const limits = options.plan.limits ?? DEFAULT_DESTINATION_LIMITS;
  const view = layout.stage
    ? new StagingView(destination, bundlePath, next, limits)
    : new ReleaseView(destination, bundlePath, next, limits);
  if (!options.dryRun && layout.stage && layout.id === undefined) {
    // Staged already: reported as that release, not staged a second time.
    const digest = target.manifest.digest;
    const staged = await stagedOfSource(destination, bundlePath, digest, signal);
    // One whose files changed since it was staged (a power cut without fsync can empty them)
    // is not what was looked at: the source is staged afresh, as a promotion would refuse it.
    const intact =
      staged !== undefined &&
      releaseIntact(await checkRelease(destination, bundlePath, staged, { limits, signal }));
    // One staged under another configuration is not what this run would stage: staged afresh.
    const configured = intact && (await stagedAsConfigured(options, staged));
    if (staged !== undefined && intact && !configured) layout.onStagedOutdated?.(staged);
    if (staged !== undefined && configured) {
      const plan = await publishTarget({
        ...options,
        dryRun: true,
        plan: { ...options.plan, destination: view, target: { ...target, release: next } },
      });
      if (isWriteAction(plan.action)) layout.onStaged?.(staged);
      return plan;
    }
  }
  const published = await publishTarget({
    ...options,
    plan: {
      ...options.plan,
      destination: view,
      target: { ...target, release: next, ...(gone ? { repair: true } : {}) },
    },
    beforeExecute: async (plan, lease) => {
      await options.beforeExecute?.(plan, lease);
      await prepareRelease(view, {
        lease,
        signal,
        concurrency: options.execute.concurrency,
        entries:
          options.plan.limits?.entries ??
          (options.plan.walkLimit === undefined
            ? DEFAULT_DESTINATION_LIMITS.entries
            : { value: options.plan.walkLimit }),
      });
    },
    afterCommit: async (plan, lease) => {
      if (view instanceof StagingView) {
        await commitStaged(view, lease, signal);
        layout.onStaged?.(next);
      } else {
        await finishRelease(view, next, lease, signal);
      }
      try {
        await retainReleases(view, layout.keep, lease, signal, layout.keepStaged);
      } catch (error) {
        // The new release is committed (live, or staged): a retention that fails does not undo that. The
        // caller reports it; the next publication's retention removes what this one left.
        if (layout.onRetentionFailed === undefined || signal?.aborted) throw error;
        layout.onRetentionFailed(error);
      }
      await options.afterCommit?.(plan, lease);
    },
  });
  if (isWriteAction(published.action)) {
    const rewritten = await view.changedSoFar();
    if (rewritten.length > 0) layout.onRewritten?.(rewritten);
  }
  if (gone && recorded !== undefined) layout.onRecordedMissing?.(recorded, next);
  return published;
}

/**
 * A state that records a release `current` does not link to was committed by a run that died
 * before switching (or the release's snapshot went missing since): under the lease (recovering
 * that run's journal first, in that release), the snapshot is written and the switch made,
 * unless the state still says a replacement is under way there — then the publication's own
 * preparation finishes it once the marker is recovered. A run that died (or failed) between its
 * switch and its retention left releases beyond `keep`: they are removed here too, so that the
 * next run finishes that retention even when it only skips.
 */
async function settlePendingSwitch(
  options: PublishTargetOptions,
  { keep, keepStaged }: ReleaseLayout,
): Promise<void> {
  const { destination, target, signal } = options.plan;
  const bundlePath = target.bundlePath;
  const look = new ReleaseView(destination, bundlePath);
  const recorded = await look.stateRelease(signal);
  if (recorded === undefined || (await settled(look, recorded, keep, keepStaged, signal))) return;
  let lease: Awaited<ReturnType<typeof holdLease>>;
  try {
    lease = await holdLease(look, bundlePath, target.owner, {
      ...options.lease,
      signal,
      onRecovered: options.onRecovered,
      limits: options.plan.limits,
    });
  } catch (error) {
    // A live run holds the lease: it is the one between its commit and its switch, and switches.
    if (error instanceof LeaseHeldError) return;
    throw error;
  }
  try {
    const view = new ReleaseView(destination, bundlePath, undefined, options.plan.limits);
    const id = await view.stateRelease(signal);
    if (id === undefined || (await settled(view, id, keep, keepStaged, signal))) return;
    if (await stillMarked(view, bundlePath, signal)) return;
    if (!(await switchedWithSnapshot(view, id, signal)))
      await finishRelease(view, id, lease, signal);
    // What a run killed between its switch and its retention left, the next run removes.
    await retainReleases(view, keep, lease, signal, keepStaged);
  } finally {
    await lease.release();
  }
}

/**
 * Nothing is left to finish: the recorded release is live, has its snapshot, and retention has
 * nothing to remove.
 */
async function settled(
  view: ReleaseView,
  id: string,
  keep: number,
  keepStaged: number | undefined,
  signal?: AbortSignal,
): Promise<boolean> {
  if (!(await switchedWithSnapshot(view, id, signal))) return false;
  return (await releasesToRetire(view, keep, signal, keepStaged)).length === 0;
}

/**
 * A run of a source that is staged makes that release live — the bytes that were looked at —
 * with rollback's checks, instead of writing it again; its own plan then skips. A staged release
 * that changed since it was staged is not promoted: the run publishes the source afresh. A dry run
 * checks the staged release as the promotion would and reports it, changing nothing.
 */
async function promoteStagedSource(
  options: PublishTargetOptions,
  layout: ReleaseLayout,
): Promise<void> {
  const { destination, target, signal } = options.plan;
  if (target.force || target.repair) return;
  const id = await stagedOfSource(destination, target.bundlePath, target.manifest.digest, signal);
  if (id === undefined) return;
  if (!(await stagedAsConfigured(options, id))) {
    layout.onStagedOutdated?.(id);
    return;
  }
  try {
    await rollbackRelease({
      destination,
      bundlePath: target.bundlePath,
      owner: target.owner,
      to: id,
      promote: true,
      dryRun: options.dryRun ?? false,
      lease: options.lease,
      signal,
      limits: options.plan.limits,
    });
  } catch (error) {
    if (!(error instanceof ReleaseRefusedError)) throw error;
    layout.onPromotionRefused?.(id, error);
    return;
  }
  layout.onPromoted?.(id);
}

/** The recorded release is live and has its snapshot. */
async function switchedWithSnapshot(
  view: ReleaseView,
  id: string,
  signal?: AbortSignal,
): Promise<boolean> {
  if (id !== (await view.live(signal))) return false;
  return snapshotExists(view.inner, view.bundlePath, id, signal);
}

async function stillMarked(view: ReleaseView, bundlePath: string, signal?: AbortSignal) {
  try {
    const { bytes } = await view.inner.readVersioned(statePath(bundlePath), { signal });
    return replacementMarkers(parseDocument(Buffer.from(bytes).toString("utf8"))).length > 0;
  } catch (error) {
    if (isStorageError(error, "not_found")) return false;
    throw error;
  }
}
