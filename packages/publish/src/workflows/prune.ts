import type { Lease } from "@distributor/engine";
import { PendingDeletesError, UncommittedError } from "@distributor/engine";
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
import {
  isStorageError,
  joinPrefix,
  mapBounded,
  STATE_FILE_NAME,
  type StorageBackend,
} from "@distributor/storage";
import type { Config, PrunePolicy } from "../config/types.js";
import {
  destinationRootPath,
  maintenanceLease,
  readRootState,
  scopeReport,
  withRootLease,
  writeRootState,
} from "./destination-root.js";
import { errorCode, errorMessage } from "./errors.js";
import { type PruneBundleRecord, pruneBundles } from "./prune-bundles.js";
import { livePaths } from "./selection.js";
import { openConfiguredDestination, type WorkflowOptions, withBackend } from "./shared.js";

export type { PruneBundleRecord } from "./prune-bundles.js";

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
 * A prune that stopped part-way: the state rewrite or a delete after it failed, or the run was
 * aborted. `report` says whether the state changed, what was deleted (and `failed_output`).
 * Outputs the new state no longer records but that are still there stay journaled with the
 * (abandoned) lease, so the next run at that destination removes them. `code` is the code of
 * the underlying failure.
 */
export class PruneError extends Error {
  override readonly name = "PruneError";
  readonly code: string;
  readonly report: PruneReport;

  constructor(report: PruneReport, cause: unknown, message = errorMessage(cause)) {
    super(message, { cause });
    this.code = errorCode(rootCause(cause));
    this.report = report;
  }
}

/** The failure below the protocol's wrappers: what the operator has to act on. */
function rootCause(error: unknown): unknown {
  let current = error;
  while (
    current instanceof Error &&
    current.cause !== undefined &&
    ["UncommittedError", "PendingDeletesError", "AmbiguousCommitError"].includes(current.name)
  ) {
    current = current.cause;
  }
  return current;
}

/** True for a `PruneError`, recognised by name so that it survives package copies. */
export function isPruneError(error: unknown): error is PruneError {
  return error instanceof Error && error.name === "PruneError" && "report" in error;
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
  const { pipeline, destination, backend } = await openConfiguredDestination(options, dryRun);
  const owner = ownerScope(pipeline.id, destination.id);
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
      });
    }
    return withRootLease(backend, owner, dryRun, maintenanceLease(options), async (lease) => {
      const { document, version } = await readRootState(backend, options.signal);
      const plan = planDestinationPrune(document, policy, {
        pipelineId: pipeline.id,
        destinationId: destination.id,
        now,
        // The publication in force is never pruned (docs/decisions.md, "Prune keeps the
        // publication in force").
        live: livePaths(destination, document, owner, ""),
      });
      const report = base(plan, "outputs");
      if (lease === undefined || report.planned_outputs.length === 0) return report;
      const state = { document, version };
      await applyPrune(backend, lease, state, report, truncateToSecond(now), options);
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
 * Carries out a prune in the commit protocol's order (docs/design/commit-protocol.md): journal the outputs to delete,
 * confirm the lease, write the state without their records (a compare-and-swap), then delete
 * them, each fenced on the version seen before the journal. A crash at any point leaves a
 * journal from which the next run completes or undoes the prune; nothing is deleted that a
 * written state still records.
 */
async function applyPrune(
  backend: StorageBackend,
  lease: Lease,
  state: { document: StateDocument; version: string },
  report: PruneReport,
  now: Date,
  options: PruneOptions,
): Promise<void> {
  const { signal } = options;
  const scope = ownerScope(report.pipeline_id, report.destination_id);
  const paths = report.planned_outputs.map((output) => output.path);
  const versions = await storedVersions(backend, "", paths, signal);
  await lease.journal(paths, [...new Set(paths.map(parentOf))]);
  try {
    signal?.throwIfAborted();
    await lease.confirm();
    report.state_changed = await removePrunedRecords(backend, state, scope, paths, now, signal);
  } catch (error) {
    // Not known to be written: nothing was deleted; the journal decides at the next run.
    throw new PruneError(
      report,
      new UncommittedError(errorMessage(error), paths, { cause: error }),
    );
  }

  const planned = new Map(report.planned_outputs.map((output) => [output.path, output]));
  const kept = await deleteFencedOutputs(
    backend,
    lease,
    "",
    paths,
    versions,
    signal,
    (path, error) => {
      // An abort is not this output's fault.
      if (!signal?.aborted) report.failed_output = planned.get(path);
      const done = new Set(report.deleted_outputs.map((deleted) => deleted.path));
      const pending = paths.filter((p) => !done.has(p));
      const what = signal?.aborted ? "the prune was interrupted" : `deleting ${path} failed`;
      return new PruneError(
        report,
        new PendingDeletesError(
          `the state no longer records the pruned outputs, but ${what}: ${errorMessage(error)}; the next run at this destination removes the rest`,
          pending,
          { cause: error },
        ),
      );
    },
    (path) => {
      const output = planned.get(path);
      if (output !== undefined) report.deleted_outputs.push(output);
      options.onEvent?.({
        type: "output_deleted",
        pipeline_id: report.pipeline_id,
        destination_id: report.destination_id,
        path,
      });
    },
  );
  for (const path of kept) {
    const output = planned.get(path);
    if (output !== undefined) report.preserved_outputs.push(output);
  }
}

/**
 * Deletes the outputs `paths` of `bundlePath` one at a time, each fenced on the version seen
 * before the journal (`versions`). One that was missing then has nothing of this prune's to
 * delete: it is not touched (an unfenced delete could remove what a run that took over since
 * wrote there and records) and counts as deleted. One rewritten since is deleted at its current
 * version only while `lease` is proven held (no state records those bytes then); without that
 * proof it stays and is returned. Any other failure throws what `failure` makes of it.
 */
export async function deleteFencedOutputs(
  backend: StorageBackend,
  lease: Lease,
  bundlePath: string,
  paths: readonly string[],
  versions: ReadonlyMap<string, StoredVersion>,
  signal: AbortSignal | undefined,
  failure: (path: string, error: unknown) => Error,
  deleted: (path: string) => void = () => undefined,
): Promise<string[]> {
  const kept: string[] = [];
  for (const path of paths) {
    const stored = versions.get(path);
    if (stored === undefined || stored.missing) {
      // Already gone before the journal: as pruned as one deleted now, and nothing here to fence
      // a delete on. (Not read at all: never deleted blind either.)
      deleted(path);
      continue;
    }
    try {
      signal?.throwIfAborted();
      lease.assertHeld();
      const { version } = stored;
      await backend.deletePaths(bundlePath, [path], {
        // An output already gone is as pruned as one deleted now.
        ignoreMissing: true,
        pruneEmptyDirs: true,
        ...(version === undefined ? {} : { ifMatch: new Map([[path, version]]) }),
      });
    } catch (error) {
      if (isStorageError(error, "conflict")) {
        // Rewritten since it was planned. With the lease proven held, no state records those
        // bytes (the one just written no longer does): delete them at the version they hold
        // now. Without that proof, a newer run may record them: they stay.
        if (await deleteAtCurrentVersion(backend, lease, bundlePath, path, signal)) {
          deleted(path);
        } else {
          kept.push(path);
        }
        continue;
      }
      throw failure(path, error);
    }
    deleted(path);
  }
  return kept;
}

/** Deletes `path` at whatever version it holds now, only while `lease` is provably held. */
async function deleteAtCurrentVersion(
  backend: StorageBackend,
  lease: Lease,
  bundlePath: string,
  path: string,
  signal: AbortSignal | undefined,
): Promise<boolean> {
  try {
    await lease.confirm();
    const { version } = await backend.stat(joinPrefix(bundlePath, path), { signal });
    lease.assertHeld();
    await backend.deletePaths(bundlePath, [path], {
      ignoreMissing: true,
      pruneEmptyDirs: true,
      ...(version === undefined ? {} : { ifMatch: new Map([[path, version]]) }),
    });
    return true;
  } catch (error) {
    if (isStorageError(error, "not_found")) return true;
    return false;
  }
}

function parentOf(path: string): string {
  const slash = path.lastIndexOf("/");
  return slash === -1 ? "" : path.slice(0, slash);
}

/**
 * What a prune saw at an output's path before its journal: `missing`, or a file with the version
 * token its delete is fenced on (none from a backend that gave the file no token).
 */
export type StoredVersion = { missing: true } | { missing: false; version: string | undefined };

/** What is stored at the outputs `paths` of `bundlePath`, one entry for each path. */
export async function storedVersions(
  backend: StorageBackend,
  bundlePath: string,
  paths: readonly string[],
  signal: AbortSignal | undefined,
): Promise<Map<string, StoredVersion>> {
  const found = await mapBounded(paths, 8, async (path): Promise<StoredVersion> => {
    try {
      const { version } = await backend.stat(joinPrefix(bundlePath, path), { signal });
      return { missing: false, version };
    } catch (error) {
      if (isStorageError(error, "not_found")) return { missing: true };
      throw error;
    }
  });
  return new Map(paths.map((path, index) => [path, found[index] as StoredVersion]));
}

/** Removes the records of pruned outputs of `scope` and rewrites the state (compare-and-swap). */
async function removePrunedRecords(
  backend: StorageBackend,
  { document, version }: { document: StateDocument; version: string },
  scope: OwnerScope,
  paths: readonly string[],
  now: Date,
  signal: AbortSignal | undefined,
): Promise<boolean> {
  const removal = isSharedRootState(document)
    ? removeMissingOwnerOutputs(document, scope, paths)
    : removeMissingOutputs(document, paths);
  if (!removal.changed) return false;
  await writeRootState(backend, { ...removal.state, updatedAt: now }, version, signal);
  return true;
}

function outputRecord(candidate: PruneCandidate): PruneOutputRecord {
  return {
    path: candidate.path,
    updated_at: formatStateTimestamp(candidate.updatedAt),
    ...(candidate.owner === undefined ? {} : { owner: scopeReport(candidate.owner) }),
  };
}
