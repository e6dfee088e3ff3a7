import {
  formatStateTimestamp,
  isSharedRootState,
  type OwnerScope,
  ownerScope,
  type PruneCandidate,
  planPrune,
  pruneCandidatesForDocument,
  removeMissingOutputs,
  removeMissingOwnerOutputs,
  type StateDocument,
  truncateToSecond,
} from "@distributor/state";
import type { StorageBackend } from "@distributor/storage";
import type { Config, PrunePolicy } from "../config/types.js";
import {
  destinationRootPath,
  readRootState,
  scopeReport,
  withRootLease,
  writeRootState,
} from "./destination-root.js";
import { errorCode, errorMessage } from "./errors.js";
import { openConfiguredDestination, type WorkflowOptions, withBackend } from "./shared.js";

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
  checked_count: number;
  planned_outputs: PruneOutputRecord[];
  /** Confirmed deletes, in deletion order (a prefix of `planned_outputs`). */
  deleted_outputs: PruneOutputRecord[];
  preserved_outputs: PruneOutputRecord[];
  /** The planned output whose delete failed; its record and those after it stay in state. */
  failed_output?: PruneOutputRecord;
  /** The state file was rewritten. */
  state_changed: boolean;
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
}

export interface DestinationPrunePlanOptions {
  pipelineId: string;
  destinationId: string;
  /** Reference time for `older_than`. */
  now: Date;
}

/**
 * A prune that stopped part-way: a delete or the state rewrite failed, or the run was aborted.
 * `report` says what was deleted (and `failed_output`); state was rewritten for confirmed deletes
 * only, so a retry starts from an accurate record. `code` is the code of the underlying failure.
 */
export class PruneError extends Error {
  override readonly name = "PruneError";
  readonly code: string;
  readonly report: PruneReport;

  constructor(report: PruneReport, cause: unknown, message = errorMessage(cause)) {
    super(message, { cause });
    this.code = errorCode(cause);
    this.report = report;
  }
}

/** True for a `PruneError`, recognised by name so that it survives package copies. */
export function isPruneError(error: unknown): error is PruneError {
  return error instanceof Error && error.name === "PruneError" && "report" in error;
}

/**
 * Selects the outputs a destination's retention policy prunes from a state document: the
 * selected owner's outputs only (single-owner state must belong to it: `state owner is A/B, not
 * C/D`). `keep_latest` newest are preserved before `older_than` is applied, by `updated_at`.
 */
export function planDestinationPrune(
  document: StateDocument,
  policy: PrunePolicy,
  options: DestinationPrunePlanOptions,
): PrunePlanReport {
  const scope = ownerScope(options.pipelineId, options.destinationId);
  const report: PrunePlanReport = {
    pipeline_id: options.pipelineId,
    destination_id: options.destinationId,
    owner_scope: scopeReport(scope),
    enabled: policy.enabled,
    checked_count: 0,
    pruned_outputs: [],
    preserved_outputs: [],
  };
  if (!policy.enabled) return report;
  const candidates = pruneCandidatesForDocument(document, scope);
  const plan = planPrune(candidates, {
    now: options.now,
    ...(policy.olderThanMs === undefined ? {} : { olderThanMs: policy.olderThanMs }),
    ...(policy.keepLatest === undefined ? {} : { keepLatest: policy.keepLatest }),
  });
  report.checked_count = candidates.length;
  report.pruned_outputs = plan.pruned.map(outputRecord);
  report.preserved_outputs = plan.preserved.map(outputRecord);
  return report;
}

/**
 * Prunes the managed outputs of one configured destination that its `retention.prune` policy
 * selects. A dry run (the default) only reports the plan. Otherwise planned outputs are deleted
 * one at a time (never `.distributor.json`, unmanaged files or another owner's outputs), then the
 * records of confirmed deletes are removed from state with a new `updated_at`. A failure part-way
 * throws a `PruneError` carrying the partial report.
 */
export async function prune(options: PruneOptions): Promise<PruneReport> {
  const dryRun = options.dryRun ?? true;
  const { pipeline, destination, backend } = await openConfiguredDestination(options, dryRun);
  const owner = ownerScope(pipeline.id, destination.id);
  return withBackend(backend, () =>
    withRootLease(backend, owner, dryRun, options, async () => {
      const { document, version } = await readRootState(backend, options.signal);
      const now = options.now?.() ?? new Date();
      const plan = planDestinationPrune(document, destination.retention.prune, {
        pipelineId: pipeline.id,
        destinationId: destination.id,
        now,
      });
      const report: PruneReport = {
        pipeline_id: pipeline.id,
        destination_id: destination.id,
        backend: destination.location.backend,
        root_path: destinationRootPath(destination),
        owner_scope: plan.owner_scope,
        enabled: plan.enabled,
        checked_count: plan.checked_count,
        planned_outputs: plan.pruned_outputs,
        deleted_outputs: [],
        preserved_outputs: plan.preserved_outputs,
        state_changed: false,
        would_change: dryRun && plan.pruned_outputs.length > 0,
        dry_run: dryRun,
      };
      if (dryRun || report.planned_outputs.length === 0) return report;
      await applyPrune(backend, { document, version }, report, truncateToSecond(now), options);
      return report;
    }),
  );
}

/** Deletes the planned outputs one by one and records the confirmed deletes in state. */
async function applyPrune(
  backend: StorageBackend,
  state: { document: StateDocument; version: string },
  report: PruneReport,
  now: Date,
  options: PruneOptions,
): Promise<void> {
  const { signal } = options;
  let failure: unknown;
  for (const output of report.planned_outputs) {
    try {
      signal?.throwIfAborted();
      await backend.deleteManagedOutputs("", [output.path], {
        // An output already gone is as pruned as one deleted now.
        ignoreMissing: true,
        pruneEmptyDirs: true,
        signal,
      });
    } catch (error) {
      failure = error;
      // An abort is not this output's fault; it stays planned, like the outputs after it.
      if (!signal?.aborted) report.failed_output = output;
      break;
    }
    report.deleted_outputs.push(output);
    options.onEvent?.({
      type: "output_deleted",
      pipeline_id: report.pipeline_id,
      destination_id: report.destination_id,
      path: output.path,
    });
  }

  if (report.deleted_outputs.length > 0) {
    const scope = ownerScope(report.pipeline_id, report.destination_id);
    const paths = report.deleted_outputs.map((output) => output.path);
    try {
      report.state_changed = await removePrunedRecords(backend, state, scope, paths, now);
    } catch (error) {
      // State that still lists deleted files is the worse problem, so it leads the message.
      const message =
        failure === undefined
          ? errorMessage(error)
          : `${errorMessage(error)} (after ${interruption(report, failure)})`;
      throw new PruneError(report, error, message);
    }
  }
  if (failure !== undefined) throw new PruneError(report, failure);
}

function interruption(report: PruneReport, failure: unknown): string {
  const failed = report.failed_output;
  return failed === undefined
    ? `the prune was interrupted: ${errorMessage(failure)}`
    : `deleting ${failed.path} failed: ${errorMessage(failure)}`;
}

/**
 * Removes the records of deleted outputs of `scope` and rewrites the state. The rewrite does not
 * take the abort signal: once files are gone, the record of it must be written.
 */
async function removePrunedRecords(
  backend: StorageBackend,
  { document, version }: { document: StateDocument; version: string },
  scope: OwnerScope,
  paths: readonly string[],
  now: Date,
): Promise<boolean> {
  const removal = isSharedRootState(document)
    ? removeMissingOwnerOutputs(document, scope, paths)
    : removeMissingOutputs(document, paths);
  if (!removal.changed) return false;
  await writeRootState(backend, { ...removal.state, updatedAt: now }, version, undefined);
  return true;
}

function outputRecord(candidate: PruneCandidate): PruneOutputRecord {
  return {
    path: candidate.path,
    updated_at: formatStateTimestamp(candidate.updatedAt),
    ...(candidate.owner === undefined ? {} : { owner: scopeReport(candidate.owner) }),
  };
}
