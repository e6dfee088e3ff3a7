// The options and report of `reconcile-state --adopt|--rebuild`, apart from the workflow so that
// the modules it is made of can name them without importing it.
import type { ReconcileStateOptions } from "./reconcile-state.js";
import type { ReconcileStateEntry } from "./unmanaged-entry.js";

/** `adopt`: record matching unmanaged files; `rebuild`: replace an invalid state. */
export type AdoptionMode = "adopt" | "rebuild";

export interface AdoptOptions extends Omit<ReconcileStateOptions, "allOwners"> {
  mode: AdoptionMode;
  /** Recorded as `distributor_version` in a state written from scratch. */
  distributorVersion?: string;
}

/** An unmanaged file recorded as a managed output. */
export interface AdoptedOutput {
  path: string;
  sha256: string;
  size: number;
}

/** An output the source would publish that was not adopted, and why. */
export interface UnmatchedOutput {
  path: string;
  /** `missing`: nothing stored; `different`: other bytes, other object metadata than the rules give (or not a file); `other_owner`: recorded by another shared-root owner. */
  reason: "missing" | "different" | "other_owner";
}

/** One destination bundle path of the current source. */
export interface AdoptBundleReport {
  /** Destination bundle path (`.` for the root). */
  bundle_path: string;
  source_id: string;
  /** What was stored before: no state, a valid one, or one that could not be read as state. */
  state_before: "absent" | "valid" | "invalid";
  adopted_outputs: AdoptedOutput[];
  /** Outputs of the source this owner already records. */
  managed_count: number;
  unmatched_outputs: UnmatchedOutput[];
  /** Entries below the bundle path that stay unmanaged. */
  unmanaged_entries: ReconcileStateEntry[];
  /** The state file was (re)written. */
  changed: boolean;
  would_change: boolean;
  /** Why this bundle path was refused; null when it was not. */
  error: { code: string; message: string } | null;
  /**
   * Under `layout: releases`, `--rebuild` restores the state from a committed release's
   * snapshot: that release's id. Absent otherwise.
   */
  restored_release?: string;
}

/** What `reconcile-state --adopt|--rebuild` found and did; the CLI prints it as the JSON `result`. */
export interface AdoptReport {
  pipeline_id: string;
  destination_id: string;
  backend: string;
  root_path: string;
  mode: AdoptionMode;
  owner_scope: { pipeline_id: string; destination_id: string };
  bundles: AdoptBundleReport[];
  changed: boolean;
  would_change: boolean;
  /** Some bundle path was refused. */
  failed: boolean;
  dry_run: boolean;
}
