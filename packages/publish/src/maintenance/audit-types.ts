// The options, events and report of `audit`, apart from the workflow so that the modules it is
// made of can name them without importing it.
import type { Config } from "../config/types.js";
import type { LeaseWithoutState } from "../shared/leases-without-state.js";
import type { WorkflowOptions } from "../shared/workflow-options.js";
import type { ReleaseReport, ReleaseSelection } from "./release-scope.js";
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
