import { type StateTransaction, withStateTransaction } from "@distributor/engine";
import {
  formatStateTimestamp,
  isSharedRootState,
  ownerScope,
  type PruneCandidate,
  planPrune,
  pruneCandidatesForDocument,
  removeMissingOutputs,
  removeMissingOwnerOutputs,
  type StateDocument,
  truncateToSecond,
} from "@distributor/state";
import { isStorageError, STATE_FILE_NAME, type StorageBackend } from "@distributor/storage";
import { openConfiguredDestination } from "../../backends/configured-location.js";
import { withBackend } from "../../backends/registry.js";
import type { PrunePolicy } from "../../config/types.js";
import { errorMessage, PruneError } from "../../errors.js";
import { destinationLimits } from "../../shared/destination-limits.js";
import { livePaths } from "../../shared/selection.js";
import {
  commitRootState,
  destinationRootPath,
  maintenanceTransaction,
  rootStateOf,
  scopeReport,
} from "../destination-root.js";
import { refuseReleaseLayout } from "../release-scope.js";
import { pruneBundles } from "./bundles.js";
import type { PruneOptions, PruneOutputRecord, PrunePlanReport, PruneReport } from "./types.js";

export interface DestinationPrunePlanOptions {
  pipelineId: string;
  destinationId: string;
  /** Reference time for `older_than`. */
  now: Date;
  /**
   * The paths of the publication in force (what the owner's recorded source gives under the
   * configuration): never candidates. Omitted, every owned output is one.
   */
  live?: ReadonlySet<string> | undefined;
}

/**
 * Selects the outputs a destination's retention policy prunes from a state document: the
 * selected owner's outputs only (single-owner state must belong to it: `state owner is A/B, not
 * C/D`), and of those only the ones the publication in force no longer lists (`live`: outputs
 * merged from older bundles, or no longer produced). Among them `keep_latest` newest are
 * preserved before `older_than` is applied, by `updated_at`.
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
  const live = options.live;
  const candidates = pruneCandidatesForDocument(document, scope).filter(
    (candidate) => live === undefined || !live.has(candidate.path),
  );
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
  // What a prune would free — whole releases — retention frees after each publication.
  refuseReleaseLayout(
    options.config,
    options,
    "prune",
    "older releases are removed after each publication beyond releases.keep; `distributor inspect` lists them and `distributor rollback` returns to one",
  );
  const { pipeline, destination, backend } = await openConfiguredDestination(options, dryRun);
  const owner = ownerScope(pipeline.id, destination.id);
  const limits = destinationLimits(pipeline.id, destination);
  const policy = destination.retention.prune;
  const now = options.now?.() ?? new Date();
  const base = (plan: PrunePlanReport, unit: PruneReport["unit"]): PruneReport => ({
    pipeline_id: pipeline.id,
    destination_id: destination.id,
    backend: destination.location.backend,
    root_path: destinationRootPath(destination),
    owner_scope: plan.owner_scope,
    enabled: plan.enabled,
    unit,
    checked_count: plan.checked_count,
    planned_outputs: plan.pruned_outputs,
    deleted_outputs: [],
    preserved_outputs: plan.preserved_outputs,
    planned_bundles: [],
    deleted_bundles: [],
    preserved_bundles: [],
    state_changed: false,
    warnings: [],
    would_change: dryRun && plan.pruned_outputs.length > 0,
    dry_run: dryRun,
  });
  return withBackend(backend, async () => {
    if (
      destination.pathMapping.mode === "preserve_relative" &&
      !(await rootStatePresent(backend, options.signal))
    ) {
      const empty: PrunePlanReport = {
        pipeline_id: pipeline.id,
        destination_id: destination.id,
        owner_scope: scopeReport(owner),
        enabled: policy.enabled,
        checked_count: 0,
        pruned_outputs: [],
        preserved_outputs: [],
      };
      const report = base(empty, "bundles");
      return pruneBundles(backend, report, owner, policy, truncateToSecond(now), {
        ...options,
        dryRun,
        limits,
      });
    }
    const transaction = maintenanceTransaction(options, limits, dryRun);
    return withStateTransaction(backend, "", owner, transaction, async (tx) => {
      const document = await rootStateOf(backend, tx.read, options.signal, limits);
      const plan = planDestinationPrune(document, policy, {
        pipelineId: pipeline.id,
        destinationId: destination.id,
        now,
        // The publication in force is never pruned (docs/decisions.md, "Prune keeps the
        // publication in force").
        live: livePaths(destination, document, owner, ""),
      });
      const report = base(plan, "outputs");
      if (tx.dryRun || report.planned_outputs.length === 0) return report;
      await applyPrune(backend, tx, document, report, truncateToSecond(now), options);
      return report;
    });
  });
}

/** True when a `.distributor.json` lies at the destination root. */
async function rootStatePresent(
  backend: StorageBackend,
  signal: AbortSignal | undefined,
): Promise<boolean> {
  try {
    await backend.stat(STATE_FILE_NAME, { signal });
    return true;
  } catch (error) {
    if (isStorageError(error, "not_found")) return false;
    throw error;
  }
}

/**
 * Carries out a prune as one state transaction (docs/design/commit-protocol.md): journal the
 * outputs to delete, commit the state without their records, then delete them, each fenced on the
 * version seen before the journal. A crash at any point leaves a journal from which the next run
 * completes or undoes the prune; nothing is deleted that a written state still records.
 */
async function applyPrune(
  backend: StorageBackend,
  tx: StateTransaction,
  document: StateDocument,
  report: PruneReport,
  now: Date,
  options: PruneOptions,
): Promise<void> {
  const { signal } = options;
  const scope = ownerScope(report.pipeline_id, report.destination_id);
  const paths = report.planned_outputs.map((output) => output.path);
  const removal = isSharedRootState(document)
    ? removeMissingOwnerOutputs(document, scope, paths)
    : removeMissingOutputs(document, paths);
  // Planned from the owner's records, so always a change; were it none, nothing is this prune's.
  if (!removal.changed) return;
  await tx.journal({ deletes: paths, directories: [...new Set(paths.map(parentOf))] });
  try {
    await commitRootState(backend, tx, { ...removal.state, updatedAt: now });
  } catch (error) {
    // Not known to be written: nothing was deleted; the journal decides at the next run.
    throw new PruneError(report, error);
  }
  report.state_changed = true;

  const planned = new Map(report.planned_outputs.map((output) => [output.path, output]));
  let kept: string[];
  try {
    kept = await tx.deleteAfter({
      failureMessage: (path, error) => {
        // An abort is not this output's fault.
        if (!signal?.aborted) report.failed_output = planned.get(path);
        const what = signal?.aborted ? "the prune was interrupted" : `deleting ${path} failed`;
        return `the state no longer records the pruned outputs, but ${what}: ${errorMessage(error)}; the next run at this destination removes the rest`;
      },
      onDeleted: (path) => {
        const output = planned.get(path);
        if (output !== undefined) report.deleted_outputs.push(output);
        options.onEvent?.({
          type: "output_deleted",
          pipeline_id: report.pipeline_id,
          destination_id: report.destination_id,
          path,
        });
      },
    });
  } catch (error) {
    throw new PruneError(report, error);
  }
  for (const path of kept) {
    const output = planned.get(path);
    if (output !== undefined) report.preserved_outputs.push(output);
  }
}

function outputRecord(candidate: PruneCandidate): PruneOutputRecord {
  return {
    path: candidate.path,
    updated_at: formatStateTimestamp(candidate.updatedAt),
    ...(candidate.owner === undefined ? {} : { owner: scopeReport(candidate.owner) }),
  };
}

function parentOf(path: string): string {
  const slash = path.lastIndexOf("/");
  return slash === -1 ? "" : path.slice(0, slash);
}
