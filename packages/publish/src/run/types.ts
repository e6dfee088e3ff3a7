// The run report, its events and options; `applyPlan` and `planRun` report in the same shape.
import type { PublishAction, PublishPlan } from "@distributor/engine";
import type { SourceSigner } from "@distributor/state";
import type { StorageBackend } from "@distributor/storage";
import type { Config, DestinationConfig, PipelineConfig } from "../config/types.js";
import type { ActionError } from "../errors.js";
import type { WorkflowOptions } from "../shared/workflow-options.js";

/**
 * What came of a destination action. `publishing` is seen only in the `plan` event of a write
 * about to be carried out: the report says `published` once it is committed, or `failed`.
 * Under `layout: releases`, `staged` says the release was committed without going live (`run
 * --stage`, `releases.promote: manual`), and `promoted` that the source was staged already and
 * that release was made live instead of being written again.
 */
export type RunStatus =
  | "published"
  | "publishing"
  | "planned"
  | "skipped"
  | "staged"
  | "promoted"
  | "failed";

/** One output of an action; every field is present, `null` where it has no value (docs/cli.md). */
export interface RunOutputReport {
  path: string;
  kind: "source" | "generated";
  source_path: string;
  transform: string | null;
  url: string | null;
  sha256: string;
  size: number;
}

/** One destination bundle path of one pipeline: what was decided and what happened. */
export interface RunActionReport {
  pipeline_id: string;
  destination_id: string;
  bundle_path: string;
  source_id: string;
  /**
   * Who signed the source bundle's manifest (`source.signatures`): the allowed_signers principal
   * and the key's `SHA256:` fingerprint, as the state records them; null for an unsigned bundle or
   * a pipeline that does not check signatures.
   */
  signer: SourceSigner | null;
  /** Null when planning failed before an action was decided (e.g. an output path collision). */
  action: PublishAction | null;
  reason: string;
  status: RunStatus;
  primary_url: string | null;
  /** The release staged or promoted (`staged`, `promoted`); null otherwise. */
  release_id: string | null;
  /** Where the staged release can be looked at (`releases.preview_url`); null otherwise. */
  preview_url: string | null;
  outputs: RunOutputReport[];
  /** Why the action failed: a documented code (docs/cli.md) and the message; null otherwise. */
  error: ActionError | null;
  /**
   * What the operator should know about an action that did not fail (docs/cli.md): files of the
   * previous release rewritten because they changed in place (`release_files_rewritten`), a
   * retention that failed once the new release was live (`retention_failed`). Empty otherwise.
   */
  warnings: RunActionWarning[];
}

/** One warning about a destination action. */
export interface RunActionWarning {
  code: string;
  message: string;
  /** Bundle-relative paths the warning is about; empty when it is about none in particular. */
  paths: string[];
}

/** A pipeline that stopped before planning any destination (source unreadable or invalid). */
export interface RunPipelineError {
  pipeline_id: string;
  code: string;
  message: string;
}

/** A problem of a source bundle that does not stop it being published. */
export interface RunWarning {
  pipeline_id: string;
  /** The bundle's path below the source root (`.` for the root). */
  bundle_path: string;
  /** `name_collision`: names that are one name on case-insensitive or normalising stores. */
  code: string;
  /** Bundle-relative path the warning is about. */
  path: string;
  message: string;
}

export interface RunReport {
  dry_run: boolean;
  actions: RunActionReport[];
  pipeline_errors: RunPipelineError[];
  /** Warnings about source bundles, in pipeline and bundle order (see `validation.portable_names`). */
  warnings: RunWarning[];
  /**
   * True when the run was interrupted (its signal fired): `actions` holds what finished, and the
   * action in progress, failed; nothing after it was started.
   */
  interrupted: boolean;
}

/**
 * Progress of a run, for displays, in the order they happen for each pipeline: `pipeline_start`;
 * per destination bundle path a `plan`, then (for a write) `output_written` per output, and
 * `cleanup_start`/`cleanup_done` around the deletes that follow the state write, then
 * `destination_done`. Validation runs once per pipeline, before its first write (or planned
 * write): `validation_start` with the totals the manifests declare, `file_validated` per checked
 * file (in completion order) and `bundle_validated` per bundle. Events are small and emitted
 * unformatted and unthrottled; a display throttles what it draws.
 */
export type RunEvent =
  | { type: "pipeline_start"; pipeline_id: string }
  | {
      /** Full validation of the pipeline's bundles begins; totals are the manifests' own. */
      type: "validation_start";
      pipeline_id: string;
      bundles: number;
      files: number;
      bytes: number;
    }
  | {
      /** One listed file was checked (size and SHA-256), whatever the outcome. */
      type: "file_validated";
      pipeline_id: string;
      bundle_path: string;
      path: string;
      size: number;
    }
  | {
      type: "bundle_validated";
      pipeline_id: string;
      bundle_path: string;
      files: number;
      bytes: number;
    }
  | {
      /**
       * The decided action; for a write, `action.outputs` (with their sizes) is exactly what
       * follows as `output_written`. A write retried after a concurrent commit plans again.
       */
      type: "plan";
      action: RunActionReport;
    }
  | {
      type: "output_written";
      pipeline_id: string;
      destination_id: string;
      path: string;
      size: number;
    }
  | {
      /**
       * The state is written; the outputs it no longer records are being deleted: `deletes`
       * of them, or `null` for a forced replacement (everything else below the bundle path).
       */
      type: "cleanup_start";
      pipeline_id: string;
      destination_id: string;
      bundle_path: string;
      deletes: number | null;
    }
  | {
      /** The deletes of `cleanup_start` succeeded (a failure shows in `destination_done`). */
      type: "cleanup_done";
      pipeline_id: string;
      destination_id: string;
      bundle_path: string;
    }
  | { type: "destination_done"; action: RunActionReport }
  | {
      /** A stale lease was broken and what its dead holder left behind was removed. */
      type: "recovered";
      pipeline_id: string;
      destination_id: string;
      bundle_path: string;
      deleted: string[];
      temp_files: string[];
    }
  | { type: "pipeline_error"; error: RunPipelineError };

export interface RunOptions extends WorkflowOptions<RunEvent> {
  config: Config;
  /** Pipelines to run, in config order; all pipelines when empty. */
  pipelineIds?: readonly string[];
  dryRun?: boolean;
  force?: boolean;
  /**
   * Also restore, where the state already records the current source (`skip_same`), the managed
   * outputs whose stored bytes are missing or changed (action `repair`). Hashes every recorded
   * output of those destinations.
   */
  repair?: boolean;
  /**
   * Stage every release instead of making it live (`run --stage`); destinations with
   * `releases.promote: manual` stage whatever this says. Only `layout: releases` destinations
   * stage: an in-place destination fails the action with `unsupported_layout`.
   */
  stage?: boolean;
  /** Recorded as `distributor_version` in written state. */
  distributorVersion?: string;
  /** How long to wait for another run's live lease on a state file (default 0: fail at once). */
  lockTimeoutMs?: number;
  /** Lease lifetime and renewal, for tests that simulate crashed runs. */
  lease?: { ttlMs?: number; renew?: boolean };
  /**
   * `--allow-deletes N`: a publication may delete up to N managed outputs whatever a
   * destination's `max_deletes` says.
   */
  allowDeletes?: number;
  /**
   * Already-open source backends by pipeline id, read instead of the configured source and left
   * open for the caller to close. This is how `http_upload` pipelines run: the upload server
   * passes the staged bundle directory.
   */
  sources?: Readonly<Record<string, StorageBackend>>;
}

/** Where a planned publication comes from and goes to (for saved plans). */
export interface PlannedTarget {
  pipeline: PipelineConfig;
  destination: DestinationConfig;
  /** Bundle path in the source backend. */
  sourceBundlePath: string;
}

/** What `run --plan-out` needs of a run besides its report: each final plan, as data. */
export interface RunHooks {
  onPublishPlan?: ((where: PlannedTarget, plan: PublishPlan) => void) | undefined;
}
