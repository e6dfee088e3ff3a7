import { assertLayout, isStateFile, walkWithin } from "@distributor/engine";
import { ownerScope } from "@distributor/state";
import {
  compareLogicalPaths,
  parentPath,
  type StorageBackend,
  type StorageEntry,
} from "@distributor/storage";
import { findDestination, findPipeline } from "../backends/configured-location.js";
import { openBackend } from "../backends/registry.js";
import type { DestinationConfig, PipelineConfig } from "../config/types.js";
import { errorCode, errorMessage } from "../errors.js";
import { destinationLimits } from "../shared/destination-limits.js";
import { leasesWithoutState } from "../shared/leases-without-state.js";
import { auditBundle } from "./audit-bundle.js";
import type { AuditDestinationReport, AuditOptions, AuditReport } from "./audit-types.js";
import { destinationRootPath } from "./destination-root.js";
import { bundleScope } from "./release-scope.js";

/**
 * Compares every managed output of every selected destination with its state record: the stored
 * size and SHA-256 (streamed, a bounded number of files at a time) against the recorded ones.
 * Reads only: no lease is taken and nothing is written. `fixed` destinations have one state at
 * their root; `preserve_relative` ones a state per bundle path, all of them audited. Only the
 * selected owner's outputs are checked (other owners' single-owner states are left out; in a
 * shared root, their records are managed, not unmanaged).
 */
export async function audit(options: AuditOptions): Promise<AuditReport> {
  const report: AuditReport = {
    destinations: [],
    checked_count: 0,
    ok_count: 0,
    missing_count: 0,
    changed_count: 0,
    unmanaged_count: 0,
    invalid_states: 0,
    leases_without_state: 0,
    incomplete_count: 0,
    reupload_needed: false,
    drift: false,
    failed: false,
  };
  for (const { pipeline, destination } of selectDestinations(options)) {
    options.signal?.throwIfAborted();
    const found = await auditDestination(options, pipeline, destination);
    report.destinations.push(found);
    for (const bundle of found.bundles) {
      report.checked_count += bundle.checked_count;
      report.ok_count += bundle.ok_count;
      report.missing_count += bundle.missing_count;
      report.changed_count += bundle.changed_count;
      report.unmanaged_count += bundle.unmanaged_entries.length;
      report.incomplete_count += bundle.incomplete_count;
      if (bundle.state === "invalid") report.invalid_states += 1;
    }
    report.leases_without_state += found.leases_without_state.length;
    report.drift ||= found.drift;
    report.reupload_needed ||= found.drift && pipeline.source.backend === "http_upload";
    report.failed ||= found.error !== null;
  }
  return report;
}

function selectDestinations(
  options: AuditOptions,
): { pipeline: PipelineConfig; destination: DestinationConfig }[] {
  const ids = options.pipelineIds ?? [];
  const pipelines =
    ids.length === 0
      ? options.config.pipelines
      : options.config.pipelines.filter((p) =>
          ids.map((id) => findPipeline(options.config, id)).includes(p),
        );
  const selected = pipelines.flatMap((pipeline) =>
    pipeline.destinations
      .filter((d) => options.destinationId === undefined || d.id === options.destinationId)
      .map((destination) => ({ pipeline, destination })),
  );
  if (options.destinationId !== undefined && selected.length === 0) {
    // Names the first selected pipeline, as `findDestination` does.
    const first = pipelines[0];
    if (first !== undefined) findDestination(first, options.destinationId);
  }
  return selected;
}

async function auditDestination(
  options: AuditOptions,
  pipeline: PipelineConfig,
  destination: DestinationConfig,
): Promise<AuditDestinationReport> {
  const report: AuditDestinationReport = {
    pipeline_id: pipeline.id,
    destination_id: destination.id,
    backend: destination.location.backend,
    root_path: destinationRootPath(destination),
    bundles: [],
    leases_without_state: [],
    drift: false,
    error: null,
  };
  let backend: StorageBackend | undefined;
  try {
    backend = await openBackend(options.backends, destination.location, {
      role: "destination",
      dryRun: true,
      secrets: options.config.secrets,
      ...(options.signal ? { signal: options.signal } : {}),
    });
    const owner = ownerScope(pipeline.id, destination.id);
    const limits = destinationLimits(pipeline.id, destination);
    const entries = await walkWithin(backend, "", limits.entries, {
      recursive: true,
      signal: options.signal,
    });
    report.leases_without_state = await leasesWithoutState(backend, entries, options.signal);
    const bundlePaths = stateBundlePaths(entries, destination);
    for (const bundlePath of bundlePaths) {
      // A bundle path stored in the other layout is refused as every command refuses it.
      await assertLayout(backend, bundlePath, destination.layout.mode, {
        maxStateBytes: limits.stateBytes.value,
        signal: options.signal,
      });
      const scope = await bundleScope(backend, destination, bundlePath, entries, {
        limits,
        releases: options.releases,
        signal: options.signal,
      });
      const bundle = await auditBundle(options, scope.backend, report, owner, bundlePath, {
        entries: scope.entries,
        bundlePaths,
        destination,
        limits,
      });
      if (bundle === undefined) continue;
      bundle.release = scope.release;
      report.bundles.push(bundle);
    }
  } catch (error) {
    if (options.signal?.aborted) throw error;
    report.error = { code: errorCode(error), message: errorMessage(error) };
  } finally {
    await backend?.close().catch(() => undefined);
  }
  report.drift =
    report.leases_without_state.length > 0 ||
    report.bundles.some(
      (b) =>
        b.state === "invalid" ||
        b.interrupted ||
        b.missing_count > 0 ||
        b.changed_count > 0 ||
        b.incomplete_count > 0 ||
        (b.release !== null &&
          (b.release.recorded !== b.release.current ||
            b.release.releases.some((release) => release.status === "drift"))),
    );
  return report;
}

/** Bundle paths with a state file: only the root for `fixed` destinations. */
function stateBundlePaths(
  entries: readonly StorageEntry[],
  destination: DestinationConfig,
): string[] {
  const paths = entries
    .filter(
      (entry) =>
        entry.kind === "file" && entry.nameProblem === undefined && isStateFile(entry.path),
    )
    .map((entry) => parentPath(entry.path));
  const wanted =
    destination.pathMapping.mode === "fixed" ? paths.filter((path) => path === "") : paths;
  return wanted.sort(compareLogicalPaths);
}
