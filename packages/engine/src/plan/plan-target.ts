import { setImmediate as nextTurn } from "node:timers/promises";
import type { Manifest } from "@distributor/bundle";
import { isSharedRootState } from "@distributor/state";
import { locatePath, runInSlices, type StorageBackend } from "@distributor/storage";
import type { RenderCache } from "../content/render-cache.js";
import type { DestinationLimits } from "../protocol/limits.js";
import { isWriteAction } from "./action.js";
import { layoutMismatch } from "./errors.js";
import { inspectDestination } from "./inspect.js";
import {
  attachUrls,
  type LinkPolicy,
  type OutputSelection,
  type PlannedOutput,
} from "./outputs.js";
import { planPublishSteps } from "./plan.js";
import type { DestinationInspection, PublishPlan, PublishTarget } from "./plan-types.js";
import { prepareOutputs } from "./prepare.js";

export interface PlanTargetOptions {
  source: StorageBackend;
  /** Bundle path in the source backend, where the manifest's files live. */
  sourceBundlePath: string;
  destination: StorageBackend;
  target: PublishTarget;
  /** The outputs the destination's publish policy selects (`selectOutputs`). */
  selection: readonly OutputSelection[];
  /** The same policy applied to another manifest (a recorded source); see `PublishTarget`. */
  selectFor?: ((manifest: Manifest) => readonly OutputSelection[]) | undefined;
  links?: LinkPolicy | undefined;
  /** Time the next state records. */
  now: Date;
  distributorVersion?: string | undefined;
  cache?: RenderCache | undefined;
  signal?: AbortSignal | undefined;
  /**
   * The destination's bounds (state bytes read and written, entries per listing) and the
   * settings behind them; default `DEFAULT_DESTINATION_LIMITS`.
   */
  limits?: DestinationLimits | undefined;
  /** Entries listed below the destination bundle path before a replacement gives up; `limits.entries` wins. */
  walkLimit?: number | undefined;
  /**
   * Prepares the selected outputs (see `prepareOutputs`). A target is planned again under its
   * lease, and what its outputs are and hash to depends only on the validated manifest, not on
   * the destination: `publishTarget` passes one that prepares once for every attempt.
   */
  prepare?: (() => Promise<readonly PreparedOutput[]>) | undefined;
}

/** An output with the digest and size of what will be written, before URLs are attached. */
export type PreparedOutput = Omit<PlannedOutput, "url">;

/** `prepareOutputs` for `options`, run on the first call and shared by every later one. */
export function prepareOnce(
  options: Omit<PlanTargetOptions, "now" | "prepare">,
): () => Promise<readonly PreparedOutput[]> {
  let prepared: Promise<readonly PreparedOutput[]> | undefined;
  return () => {
    prepared ??= prepareOutputs(options.selection, {
      source: options.source,
      sourceBundlePath: options.sourceBundlePath,
      manifest: options.target.manifest,
      cache: options.cache,
      signal: options.signal,
    });
    return prepared;
  };
}

/**
 * Plans one bundle at one destination, reading only what the decision needs: the state, then
 * (for a write) the planned paths and, for a single-owner replacement, the bundle path listing.
 * Markdown is rendered only for writes. The returned plan is the whole decision.
 */
export async function planTarget(options: PlanTargetOptions): Promise<PublishPlan> {
  const { signal } = options;
  // Each planned path's metadata: a state recording other metadata is brought up to date.
  const target: PublishTarget = {
    ...options.target,
    planned: options.selection,
    selectFor: options.selectFor,
  };
  const { inspection, decision } = await inspectDestination(
    options.destination,
    target,
    options.selection.map((output) => output.path),
    { signal, limits: options.limits, walkLimit: options.walkLimit },
  );
  // Deciding and planning are each a long synchronous step for a big bundle; without a turn
  // between them they would run as one stretch of the event loop.
  await nextTurn();
  checkLayout(options.destination, target, inspection);
  const request = {
    ...target,
    outputs: [],
    now: options.now,
    distributorVersion: options.distributorVersion,
  };
  // A repair (stored outputs looked at) needs the outputs' bytes to compare and write.
  const repairing = decision.action === "skip_same" && inspection.stored !== undefined;
  if (!isWriteAction(decision.action) && !repairing) {
    return runInSlices(planPublishSteps(request, inspection, decision));
  }
  // attachUrls copies each output, so a plan never shares output objects with another attempt's.
  const prepared = await (options.prepare ?? prepareOnce(options))();
  const { outputs, primaryUrl } = attachUrls(prepared, target.bundlePath, options.links);
  await nextTurn();
  const plan = await runInSlices(
    planPublishSteps({ ...request, outputs, primaryUrl }, inspection, decision),
  );
  return inRelease(plan, target.release);
}

/** A write plan's next state records the release it builds (single-owner states only). */
function inRelease(plan: PublishPlan, release: string | undefined): PublishPlan {
  const next = plan.nextState;
  if (release === undefined || next === undefined || isSharedRootState(next)) return plan;
  plan.nextState = { ...next, release: { id: release } };
  return plan;
}

/** Refuses to plan across layouts: see `PublishTarget.release`. */
function checkLayout(
  destination: StorageBackend,
  target: PublishTarget,
  inspection: DestinationInspection,
): void {
  const state = inspection.status.state;
  if (state === undefined || isSharedRootState(state)) return;
  const where = locatePath(
    destination.location,
    target.bundlePath === "" ? "." : target.bundlePath,
  );
  if (target.release === undefined && state.release !== undefined) {
    throw layoutMismatch(where, "releases");
  }
  if (target.release !== undefined && state.release === undefined) {
    throw layoutMismatch(where, "in_place");
  }
}
