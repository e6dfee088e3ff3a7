import { rollbackRelease } from "@distributor/engine";
import { ownerScope } from "@distributor/state";
import { displayPath } from "@distributor/storage";
import { bundlePrefix, openConfiguredDestination } from "../backends/configured-location.js";
import type { BackendRegistry } from "../backends/registry.js";
import { withBackend } from "../backends/registry.js";
import type { Config } from "../config/types.js";
import { WorkflowError } from "../errors.js";
import { destinationLimits } from "../shared/destination-limits.js";
import { maintenanceTransaction } from "./destination-root.js";

export interface RollbackOptions {
  config: Config;
  pipelineId: string;
  destinationId: string;
  /** Destination bundle path (`.` or absent: the destination root). */
  bundlePath?: string | undefined;
  /** The release to return to; absent: the newest committed release before `current`. */
  to?: string | undefined;
  dryRun?: boolean | undefined;
  /** Compare every file's digest with the target's snapshot, not only the recorded identities. */
  verify?: boolean | undefined;
  /** Switch to a target that changed since it was committed; the report says it did. */
  force?: boolean | undefined;
  lockTimeoutMs?: number | undefined;
  backends?: BackendRegistry | undefined;
  signal?: AbortSignal | undefined;
  now?: (() => Date) | undefined;
  lease?: { ttlMs?: number; renew?: boolean } | undefined;
}

export interface RollbackReport {
  pipeline_id: string;
  destination_id: string;
  bundle_path: string;
  /** The release `current` linked to before; null when there was none. */
  from: string | null;
  to: string;
  /** True when `current` was switched (false for a dry run, or when it already linked there). */
  switched: boolean;
  dry_run: boolean;
  /** How long the switch took, state and link, once the lease was held (0 for a dry run). */
  switch_ms: number;
  /** The check of the target before the switch. */
  check: {
    /** `identities` (the recorded identity of each file) or `digests` (`--verify`). */
    method: "identities" | "digests" | "sizes";
    changed: string[];
    missing: string[];
    added: string[];
  };
  /** True when the target had changed since it was committed and `--force` switched anyway. */
  forced: boolean;
  /**
   * True when the command was interrupted once the state was committed: the switch to `to` was
   * finished anyway (it is never left half-done for a later run to finish).
   */
  finished_after_interrupt: boolean;
}

/**
 * Returns a destination bundle path under `layout: releases` to a committed release: the state
 * becomes that release's snapshot and `current` links to it. Nothing else is written or copied.
 */
export async function rollback(options: RollbackOptions): Promise<RollbackReport> {
  return switchRelease(options, {});
}

/**
 * The switch `rollback` and `promote` share: the same lease, checks, compare-and-swap of the
 * state and confirmed switch; `choice` says which releases may be the target.
 */
export async function switchRelease(
  options: RollbackOptions,
  choice: { promote?: boolean; latest?: boolean },
): Promise<RollbackReport> {
  const dryRun = options.dryRun ?? false;
  const { pipeline, destination, backend } = await openConfiguredDestination(options, dryRun);
  return withBackend(backend, async () => {
    if (destination.layout.mode !== "releases") {
      throw new WorkflowError(
        "unsupported_layout",
        choice.promote
          ? `destination ${destination.id} publishes in place (no layout: releases): there is no staged release to promote; a release can be staged only under layout: releases`
          : `destination ${destination.id} publishes in place (no layout: releases): there is no earlier release to roll back to; publish the older bundle again instead`,
      );
    }
    const bundlePath = bundlePrefix(options.bundlePath ?? ".");
    const { lease, limits } = maintenanceTransaction(
      options,
      destinationLimits(pipeline.id, destination),
    );
    const result = await rollbackRelease({
      destination: backend,
      bundlePath,
      owner: ownerScope(pipeline.id, destination.id),
      to: options.to,
      ...choice,
      dryRun,
      verify: options.verify,
      force: options.force,
      lease,
      signal: options.signal,
      limits,
      advice: {
        config: options.config.sourceName,
        pipeline: pipeline.id,
        destination: destination.id,
        bundlePath: options.bundlePath,
      },
    });
    return {
      pipeline_id: pipeline.id,
      destination_id: destination.id,
      bundle_path: displayPath(bundlePath),
      from: result.from ?? null,
      to: result.to,
      switched: result.switched,
      dry_run: dryRun,
      switch_ms: result.switchMs,
      check: {
        method: result.check.verified
          ? "digests"
          : result.check.identities
            ? "identities"
            : "sizes",
        changed: result.check.changed,
        missing: result.check.missing,
        added: result.check.added,
      },
      forced: result.forced,
      finished_after_interrupt: result.finishedAfterAbort === true,
    };
  });
}
