import { type DestinationLimit, ReleaseView, walkWithin } from "@distributor/engine";
import { isWithinPrefix, type StorageBackend, type StorageEntry } from "@distributor/storage";
import { findDestination, findPipeline } from "../backends/configured-location.js";
import type { Config, DestinationConfig } from "../config/types.js";
import { WorkflowError } from "../errors.js";

/** Under the release layout: which release the state records and which `current` links to. */
export interface ReleaseReport {
  /** The release the state's records describe; null when it records none. */
  recorded: string | null;
  /** The release `current` links to; null when there is no link. */
  current: string | null;
}

/**
 * What maintenance reads of one bundle path: the destination itself under the default layout;
 * under the release layout a view in which the outputs of the release the state records lie
 * directly in the bundle path (the other releases, the snapshots and `current` out of sight),
 * with the listing as that view shows it and which release is in force.
 */
export async function bundleScope(
  backend: StorageBackend,
  destination: DestinationConfig,
  bundlePath: string,
  entries: readonly StorageEntry[],
  options: { limit: DestinationLimit; signal?: AbortSignal | undefined },
): Promise<{
  backend: StorageBackend;
  entries: readonly StorageEntry[];
  release: ReleaseReport | null;
}> {
  if (destination.layout.mode !== "releases") return { backend, entries, release: null };
  const view = new ReleaseView(backend, bundlePath);
  const [listed, recorded, current] = await Promise.all([
    walkWithin(view, bundlePath, options.limit, { recursive: true, signal: options.signal }),
    view.stateRelease(options.signal),
    view.live(options.signal),
  ]);
  // Entries outside the bundle path stay as they are (a nested bundle path's, say).
  const outside = entries.filter((entry) => !isWithinPrefix(bundlePath, entry.path));
  return {
    backend: view,
    entries: [...outside, ...listed],
    release: { recorded: recorded ?? null, current: current ?? null },
  };
}

/**
 * Refuses a maintenance command that changes records or outputs in place on a destination with
 * `layout: releases`: a published release is never changed, and those commands would edit its
 * records or files behind its snapshot's back.
 */
export function refuseReleaseLayout(
  config: Config,
  where: { pipelineId: string; destinationId: string },
  command: string,
  instead: string,
): void {
  const layout = findDestination(
    findPipeline(config, where.pipelineId),
    where.destinationId,
  ).layout;
  if (layout.mode !== "releases") return;
  throw new WorkflowError(
    "unsupported_layout",
    `destination ${where.destinationId} has layout: releases, whose releases are never changed once published, so ${command} does not apply: ${instead}`,
  );
}
