import { rollbackRelease } from "@distributor/engine";
import { ownerScope } from "@distributor/state";
import { displayPath } from "@distributor/storage";
import { bundlePrefix, openConfiguredDestination } from "../backends/configured-location.js";
import { withBackend } from "../backends/registry.js";
import { destinationLimits } from "../shared/destination-limits.js";
import type { AdoptOptions, AdoptReport } from "./adopt-types.js";
import { destinationRootPath, maintenanceTransaction, scopeReport } from "./destination-root.js";

/**
 * `reconcile-state --rebuild` under `layout: releases`: a state that cannot be read is replaced
 * by the committed snapshot of the release `current` links to (the newest committed one when
 * `current` is missing or dangling), after that release is checked against what identified its
 * files when it was committed — the commit protocol's lease and compare-and-swap, then `current`
 * switched to it if it was not. No output is written, linked or removed: the snapshot is the
 * state exactly as committed, so the state again describes the files readers see.
 */
export async function restoreReleaseState(
  options: AdoptOptions & { bundlePath?: string | undefined },
): Promise<AdoptReport> {
  const dryRun = options.dryRun ?? false;
  const { pipeline, destination, backend } = await openConfiguredDestination(options, dryRun);
  const owner = ownerScope(pipeline.id, destination.id);
  const bundlePath = bundlePrefix(options.bundlePath ?? ".");
  const { lease, limits } = maintenanceTransaction(
    options,
    destinationLimits(pipeline.id, destination),
  );
  return withBackend(backend, async () => {
    const result = await rollbackRelease({
      destination: backend,
      bundlePath,
      owner,
      dryRun,
      restoreInvalidState: true,
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
      backend: destination.location.backend,
      root_path: destinationRootPath(destination),
      mode: "rebuild",
      owner_scope: scopeReport(owner),
      bundles: [
        {
          bundle_path: displayPath(bundlePath),
          source_id: "",
          state_before: "invalid",
          adopted_outputs: [],
          managed_count: 0,
          unmatched_outputs: [],
          unmanaged_entries: [],
          changed: !dryRun,
          would_change: dryRun,
          error: null,
          restored_release: result.to,
        },
      ],
      changed: !dryRun,
      would_change: dryRun,
      failed: false,
      dry_run: dryRun,
    };
  });
}
