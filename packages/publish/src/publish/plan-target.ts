import type { StorageBackend } from "@distributor/storage";
import { isWriteAction } from "./action.js";
import { inspectDestination } from "./inspect.js";
import { attachUrls, type LinkPolicy, type OutputSelection } from "./outputs.js";
import { type PublishPlan, type PublishTarget, planPublish } from "./plan.js";
import { prepareOutputs } from "./prepare.js";
import type { RenderCache } from "./render-cache.js";

export interface PlanTargetOptions {
  source: StorageBackend;
  /** Bundle path in the source backend, where the manifest's files live. */
  sourceBundlePath: string;
  destination: StorageBackend;
  target: PublishTarget;
  /** The outputs the destination's publish policy selects (`selectOutputs`). */
  selection: readonly OutputSelection[];
  links?: LinkPolicy | undefined;
  /** Time the next state records. */
  now: Date;
  distributorVersion?: string | undefined;
  cache?: RenderCache | undefined;
  signal?: AbortSignal | undefined;
  /** Entries listed below the destination bundle path before a replacement gives up. */
  walkLimit?: number | undefined;
}

/**
 * Plans one bundle at one destination, reading only what the decision needs: the state, then
 * (for a write) the planned paths and, for a single-owner replacement, the bundle path listing.
 * Markdown is rendered only for writes. The returned plan is the whole decision.
 */
export async function planTarget(options: PlanTargetOptions): Promise<PublishPlan> {
  const { target, signal } = options;
  const { inspection, decision } = await inspectDestination(
    options.destination,
    target,
    options.selection.map((output) => output.path),
    { signal, walkLimit: options.walkLimit },
  );
  const request = {
    ...target,
    outputs: [],
    now: options.now,
    distributorVersion: options.distributorVersion,
  };
  if (!isWriteAction(decision.action)) return planPublish(request, inspection);
  const prepared = await prepareOutputs(options.selection, {
    source: options.source,
    sourceBundlePath: options.sourceBundlePath,
    manifest: target.manifest,
    cache: options.cache,
    signal,
  });
  const { outputs, primaryUrl } = attachUrls(prepared, target.bundlePath, options.links);
  return planPublish({ ...request, outputs, primaryUrl }, inspection);
}
