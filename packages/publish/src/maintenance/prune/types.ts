// The prune report, its events and options, shared by the root-state and per-bundle prunes.
import type { Config } from "../../config/types.js";
import type { WorkflowOptions } from "../../shared/workflow-options.js";

/** A bundle path a prune across bundle paths planned, deleted or preserved. */
export interface PruneBundleRecord {
  /** Destination bundle path (`.` for the root). */
  bundle_path: string;
  /**
   * When the owner last published there: the state's `published_at` (single-owner), or the
   * newest `updated_at` of the owner's outputs (shared root). Null for a shared-root owner that
   * records no output any more. Reported only: retention goes by `created`.
   */
  published_at: string | null;
  source_id: string;
  /**
   * The `created` of the source manifest published there, as the state records it: the bundle's
   * content time, which ranks bundles for `keep_latest` and ages them for `older_than`.
   */
  created: string;
  /** Managed outputs of the owner there. */
  output_count: number;
  /** The state file goes with the bundle: no other owner records anything in it. */
  removes_state: boolean;
}

/** The owner whose outputs a prune considers. */
export interface PruneOwnerScope {
  pipeline_id: string;
  destination_id: string;
}

/** A managed output a prune planned, deleted, preserved or failed to delete. */
export interface PruneOutputRecord {
  path: string;
  /** The output's `updated_at` from state, which retention measures age from. */
  updated_at: string;
  /** The output's owner; shared-root state only. */
  owner?: PruneOwnerScope;
}

/** What a retention policy selects from one state document (pure planning, no storage). */
export interface PrunePlanReport {
  pipeline_id: string;
  destination_id: string;
  owner_scope: PruneOwnerScope;
  /** `retention.prune.enabled`; a disabled policy plans nothing and checks nothing. */
  enabled: boolean;
  /** Managed outputs of the owner that the policy considered. */
  checked_count: number;
  /** Oldest first: the order they are deleted in. */
  pruned_outputs: PruneOutputRecord[];
  /** Newest first. */
  preserved_outputs: PruneOutputRecord[];
}

/**
 * Something the operator should know that did not stop the prune: `bundle_in_source`, a bundle
 * path planned to be pruned whose source still holds the bundle (the next `run` publishes it
 * again), or `source_unchecked`, the source could not be listed to tell.
 */
export interface PruneWarning {
  code: "bundle_in_source" | "source_unchecked";
  /** The bundle path the warning is about (`bundle_in_source`). */
  bundle_path?: string;
  message: string;
}

/** What `prune` planned and did; the CLI prints it as the JSON `result`. */
export interface PruneReport {
  pipeline_id: string;
  destination_id: string;
  /** Backend name of the destination (`local`, `s3`, `ssh`). */
  backend: string;
  /** The destination's configured root (see `destinationRootPath`). */
  root_path: string;
  owner_scope: PruneOwnerScope;
  enabled: boolean;
  /**
   * What retention counts: `outputs` of the state at the destination root, or whole `bundles`
   * of a `preserve_relative` destination with one state per bundle path (no root state).
   */
  unit: "outputs" | "bundles";
  /** Owned outputs (`outputs`) or owned bundle states (`bundles`) the policy considered. */
  checked_count: number;
  /** Outputs of planned bundles too, with paths relative to the destination root. */
  planned_outputs: PruneOutputRecord[];
  /** Confirmed deletes, in deletion order (a prefix of `planned_outputs`). */
  deleted_outputs: PruneOutputRecord[];
  preserved_outputs: PruneOutputRecord[];
  /** The planned output whose delete failed; its record and those after it stay in state. */
  failed_output?: PruneOutputRecord;
  /** `bundles` only (else empty): bundle paths to prune, oldest first. */
  planned_bundles: PruneBundleRecord[];
  /** Bundle paths pruned entirely, in order (a prefix of `planned_bundles`). */
  deleted_bundles: PruneBundleRecord[];
  /** Bundle paths kept, newest first; then any whose state changed since planning. */
  preserved_bundles: PruneBundleRecord[];
  /** The planned bundle path whose prune failed; it and those after it are not pruned. */
  failed_bundle?: PruneBundleRecord;
  /** The state file was rewritten. */
  state_changed: boolean;
  /** Nothing that stopped the prune; `bundles` only so far (else empty). */
  warnings: PruneWarning[];
  /** A dry run planned deletes. */
  would_change: boolean;
  dry_run: boolean;
}

export type PruneEvent = {
  type: "output_deleted";
  pipeline_id: string;
  destination_id: string;
  path: string;
};

export interface PruneOptions extends WorkflowOptions<PruneEvent> {
  config: Config;
  /** With `destinationId`, selects the destination root, its retention policy and the owner. */
  pipelineId: string;
  destinationId: string;
  /**
   * Report the plan without deleting or rewriting anything. Defaults to true: a caller must pass
   * `dryRun: false` (the CLI's `--apply`) to delete.
   */
  dryRun?: boolean;
  /** How long to wait for another run's lease on the state (default 0: fail at once). */
  lockTimeoutMs?: number;
  /** Lease lifetime and renewal (tests shorten it). */
  lease?: { ttlMs?: number; renew?: boolean };
}
