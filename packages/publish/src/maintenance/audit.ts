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
import type { Config, DestinationConfig, PipelineConfig } from "../config/types.js";
import { errorCode, errorMessage } from "../errors.js";
import { destinationLimits } from "../shared/destination-limits.js";
import { type LeaseWithoutState, leasesWithoutState } from "../shared/leases-without-state.js";
import type { WorkflowOptions } from "../shared/workflow-options.js";
import { auditBundle } from "./audit-bundle.js";
import { destinationRootPath } from "./destination-root.js";
import { bundleScope, type ReleaseReport, type ReleaseSelection } from "./release-scope.js";
import type { ReconcileStateEntry } from "./unmanaged-entry.js";

export type AuditOutputStatus = "ok" | "missing" | "changed";

/** One managed output compared with its record. */
export interface AuditOutputReport {
  path: string;
  status: AuditOutputStatus;
  /** What the state records. */
  sha256: string;
  size: number;
  /** What is stored: a file's digest and size; null when missing or not a file. */
  found_sha256: string | null;
  found_size: number | null;
  /** `file`, `directory`, `symlink`, `other`, or null when nothing is stored there. */
  found_type: "file" | "directory" | "symlink" | "other" | null;
}

/** One destination bundle path with a state file. */
export interface AuditBundleReport {
  /** Destination bundle path (`.` for the destination root). */
  bundle_path: string;
  state_file: string;
  /** `invalid`: the state file could not be read as state (reported, counted as drift). */
  state: "valid" | "invalid";
  /** Why the state is invalid; null otherwise. */
  error: string | null;
  checked_count: number;
  ok_count: number;
  missing_count: number;
  changed_count: number;
  /** Every managed output of the owner, in path order. */
  outputs: AuditOutputReport[];
  /** Entries below the bundle path that no state records (never counted as drift). */
  unmanaged_entries: ReconcileStateEntry[];
  /**
   * Where the records fall short of the publication their recorded source gives under the
   * configuration in force, in path order (counted as drift): a plain `run` completes it.
   */
  incomplete: AuditIncompleteReport[];
  incomplete_count: number;
  /**
   * Who signed the source bundle the state records for the owner, when its pipeline checked
   * signatures (`source.signatures`); null otherwise, and for an invalid state.
   */
  signer: { principal: string; fingerprint: string } | null;
  /**
   * The state carries a replacement marker of the audited owner: a run was part-way through a
   * publication here (interrupted, or still running). Its records may not describe the files yet:
   * differences are expected, and the next `run` completes the publication. Counted as drift.
   */
  interrupted: boolean;
  /**
   * Under `layout: releases`: the release the state records and the one `current` links to; when
   * they differ (a run died before switching) it counts as drift, and the next run switches.
   * Null under the default layout.
   */
  release: ReleaseReport | null;
}

/**
 * One difference between the publication in force and the records: `not_recorded` (an output
 * the recorded source gives that no record covers), `recorded_otherwise` (its record describes
 * another output: other bytes, source file or transform), `not_produced` (a record of an output
 * the configuration no longer gives; `replace` reconciliation only).
 */
export interface AuditIncompleteReport {
  path: string;
  status: "not_recorded" | "recorded_otherwise" | "not_produced";
}

/** One configured destination. */
export interface AuditDestinationReport {
  pipeline_id: string;
  destination_id: string;
  backend: string;
  root_path: string;
  bundles: AuditBundleReport[];
  /**
   * Leases with no state beside them: a first publication under way, or one that was killed and
   * left unrecorded outputs (the next run recovers them). Counted as drift.
   */
  leases_without_state: LeaseWithoutState[];
  /** A missing or changed output, or an invalid state, somewhere below this destination. */
  drift: boolean;
  /** The destination could not be audited (unreachable, listing too large, ...); null otherwise. */
  error: { code: string; message: string } | null;
}

/** What `audit` found; the CLI prints it as the JSON `result`. */
export interface AuditReport {
  destinations: AuditDestinationReport[];
  checked_count: number;
  ok_count: number;
  missing_count: number;
  changed_count: number;
  unmanaged_count: number;
  invalid_states: number;
  /** Leases found with no state beside them (see `AuditDestinationReport`). */
  leases_without_state: number;
  /** Outputs of publications in force that the records lack or describe otherwise, and back. */
  incomplete_count: number;
  /**
   * Set when drift was found in a destination whose pipeline takes its sources from HTTP
   * uploads: the source a run needs to restore it is gone, so a re-upload of the bundle does.
   */
  reupload_needed: boolean;
  /** Any destination drifted. */
  drift: boolean;
  /** Any destination could not be audited. */
  failed: boolean;
}

export type AuditEvent =
  | {
      type: "bundle_start";
      pipeline_id: string;
      destination_id: string;
      bundle_path: string;
      outputs: number;
      bytes: number;
    }
  | {
      type: "output_checked";
      pipeline_id: string;
      destination_id: string;
      bundle_path: string;
      path: string;
      size: number;
      status: AuditOutputStatus;
    };

export interface AuditOptions extends WorkflowOptions<AuditEvent> {
  config: Config;
  /** Pipelines to audit, in config order; every pipeline when empty. */
  pipelineIds?: readonly string[];
  /** Only this destination of the selected pipelines. */
  destinationId?: string;
  /** Files hashed at once (default 4). */
  concurrency?: number;
  /**
   * Under `layout: releases`, which committed releases are checked against what identified
   * their files at commit time: every one (the default) or the one `current` links to.
   */
  releases?: ReleaseSelection;
}

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
