import { discoverBundles } from "@distributor/bundle";
import {
  type DestinationLimits,
  LeaseHeldError,
  readLease,
  type StateTransaction,
  walkWithin,
  withStateTransaction,
} from "@distributor/engine";
import {
  isSharedRootState,
  type OwnerScope,
  removeMissingOwnerOutputs,
  type StateDocument,
  sameOwnerScope,
} from "@distributor/state";
import {
  compareLogicalPaths,
  displayPath,
  joinPrefix,
  LEASE_FILE_NAME,
  parentPath,
  STATE_FILE_NAME,
  type StorageBackend,
  type StorageEntry,
} from "@distributor/storage";
import { findPipeline, openConfiguredSource } from "../../backends/configured-location.js";
import { withBackend } from "../../backends/registry.js";
import type { PrunePolicy } from "../../config/types.js";
import { errorCode, errorMessage, PruneError, WorkflowError } from "../../errors.js";
import { maintenanceTransaction } from "../destination-root.js";
import {
  type BundleCandidate,
  bundleRecord,
  candidateOf,
  outputRecords,
  planBundlePrune,
  readCandidate,
  samePublication,
} from "./candidates.js";
import type { PruneOptions, PruneReport, PruneWarning } from "./types.js";

/**
 * `prune` of a `preserve_relative` destination without a root state: every bundle state below
 * the root that records the owner is a candidate, and a pruned bundle loses all of the owner's
 * outputs; its state file goes too unless another owner of a shared root remains in it. Each
 * bundle is pruned under its own lease in the commit protocol's order: journal, state written
 * without the owner's records (compare-and-swap), fenced deletes, then the state file removed
 * (fenced on the version just written) or the owner's record dropped from it. A bundle the owner
 * published again since planning (another source id, manifest `created` or publication time) is
 * preserved; otherwise what its state records under the lease is what is pruned and reported,
 * outputs recorded since planning included. The first failure stops the prune (`PruneError`).
 */
export async function pruneBundles(
  backend: StorageBackend,
  report: PruneReport,
  owner: OwnerScope,
  policy: PrunePolicy,
  now: Date,
  options: PruneOptions & { dryRun: boolean; limits: DestinationLimits },
): Promise<PruneReport> {
  const { signal, limits } = options;
  // A disabled policy plans nothing and checks nothing, as at a root state.
  if (!policy.enabled) return report;
  // The whole root is listed, within the destination's `max_entries`.
  const entries = await walkWithin(backend, "", limits.entries, { recursive: true, signal });
  const states = namedFiles(entries, STATE_FILE_NAME);
  if (states.length === 0) {
    throw new WorkflowError(
      "state_not_found",
      `${backend.location}: no ${STATE_FILE_NAME} at the destination root or below it, so nothing is managed there`,
    );
  }
  if (!options.dryRun) {
    const stated = new Set(states);
    const orphans = namedFiles(entries, LEASE_FILE_NAME).filter((path) => !stated.has(path));
    for (const bundlePath of orphans) await recoverOrphanLease(backend, bundlePath, owner, options);
  }
  const candidates: BundleCandidate[] = [];
  for (const bundlePath of states) {
    const candidate = await readCandidate(backend, bundlePath, owner, signal, limits);
    if (candidate !== undefined) candidates.push(candidate);
  }
  const plan = planBundlePrune(candidates, policy, now);
  report.checked_count = candidates.length;
  report.planned_bundles = plan.pruned.map(bundleRecord);
  report.preserved_bundles = plan.preserved.map(bundleRecord);
  report.planned_outputs = plan.pruned.flatMap(outputRecords);
  report.preserved_outputs = plan.preserved.flatMap(outputRecords);
  report.would_change = options.dryRun && plan.pruned.length > 0;
  report.warnings.push(...(await sourceWarnings(plan.pruned, options)));
  if (options.dryRun) return report;

  for (const candidate of plan.pruned) {
    signal?.throwIfAborted();
    const record = bundleRecord(candidate);
    let outcome: BundleCandidate | "changed";
    try {
      outcome = await withStateTransaction(
        backend,
        candidate.bundlePath,
        owner,
        maintenanceTransaction(options, limits),
        (tx) => pruneBundle(backend, tx, candidate, owner, report, now, signal),
      );
    } catch (error) {
      if (!signal?.aborted) report.failed_bundle = record;
      if (error instanceof PruneError) throw error;
      throw new PruneError(report, error);
    }
    if (outcome === "changed") {
      // Published again (or repaired) since planning: not what was planned to go.
      report.preserved_bundles.push(record);
      report.preserved_outputs.push(...outputRecords(candidate));
      continue;
    }
    // What the state recorded under the lease went, which may differ from the plan (outputs
    // recorded since planning).
    report.deleted_bundles.push(bundleRecord(outcome));
    report.deleted_outputs.push(...outputRecords(outcome));
    for (const output of outcome.outputs) {
      options.onEvent?.({
        type: "output_deleted",
        pipeline_id: report.pipeline_id,
        destination_id: report.destination_id,
        path: joinPrefix(outcome.bundlePath, output.path),
      });
    }
  }
  return report;
}

async function pruneBundle(
  backend: StorageBackend,
  tx: StateTransaction,
  candidate: BundleCandidate,
  owner: OwnerScope,
  report: PruneReport,
  now: Date,
  signal: AbortSignal | undefined,
): Promise<BundleCandidate | "changed"> {
  const { bundlePath } = candidate;
  // Read again under the lease (taking it may have recovered a dead run's journal, which
  // rewrites the state): pruned only while it is still the publication that was planned.
  const current = candidateOf(backend, bundlePath, tx.read, owner);
  if (current === undefined || !samePublication(current, candidate)) return "changed";
  const paths = current.outputs.map((output) => output.path);
  let { document } = current;
  if (paths.length > 0) {
    await tx.journal({ deletes: paths, directories: [...new Set(paths.map(parentPath))] });
    try {
      document = withoutOwnerOutputs(document, owner, paths, now);
      await tx.commit(document);
    } catch (error) {
      // Not known to be written: nothing was deleted; the journal decides at the next run.
      throw new PruneError(report, error);
    }
    report.state_changed = true;
    try {
      await tx.deleteAfter({
        failureMessage: (path, error) => {
          const what = signal?.aborted ? "the prune was interrupted" : `deleting ${path} failed`;
          return `the state of ${displayPath(bundlePath)} no longer records the pruned outputs, but ${what}: ${errorMessage(error)}; the next prune at this destination removes the rest`;
        },
      });
    } catch (error) {
      throw new PruneError(report, error);
    }
  }

  try {
    signal?.throwIfAborted();
    if (current.removesState) await tx.removeState();
    else await tx.commit(withoutOwner(document, owner, now));
  } catch (error) {
    // The outputs are gone (or journaled); a state left recording nothing of this owner is
    // pruned by the next prune, which also completes the journal.
    throw new PruneError(
      report,
      error,
      `the pruned outputs of ${displayPath(bundlePath)} are gone, but removing its state failed: ${errorMessage(error)}; the next prune at this destination finishes it`,
    );
  }
  report.state_changed = true;
  return current;
}

/**
 * A lease of this owner left where no state is (a prune that removed the state, or a first
 * publication, died before releasing it): taken over when stale, which recovers its journal,
 * then removed with the directories it leaves empty. A live lease is another run's: left alone.
 */
async function recoverOrphanLease(
  backend: StorageBackend,
  bundlePath: string,
  owner: OwnerScope,
  options: PruneOptions & { limits: DestinationLimits },
): Promise<void> {
  const found = await readLease(backend, bundlePath, options.signal);
  if (found === undefined) return;
  const leaseOwner = {
    pipelineId: found.owner.pipeline_id,
    destinationId: found.owner.destination_id,
  };
  if (!sameOwnerScope(leaseOwner, owner)) return;
  try {
    await withStateTransaction(
      backend,
      bundlePath,
      owner,
      maintenanceTransaction(options, options.limits),
      async (tx) => {
        // Still no state once recovered: the lease goes with the directories it leaves empty.
        if (tx.read.version === undefined) await tx.removeState();
      },
    );
  } catch (error) {
    if (error instanceof LeaseHeldError || errorCode(error) === "lease_held") return;
    throw error;
  }
}

/**
 * A warning for each planned bundle path whose source still holds a bundle there: `run`
 * publishes it again (`publish_new`), and the prune after that removes it again. Listing the
 * source is only advice: a source that cannot be listed gives one `source_unchecked` warning,
 * and an `http_upload` source (which keeps no bundles) none.
 */
async function sourceWarnings(
  pruned: readonly BundleCandidate[],
  options: PruneOptions,
): Promise<PruneWarning[]> {
  if (pruned.length === 0) return [];
  const pipeline = findPipeline(options.config, options.pipelineId);
  if (pipeline.source.backend === "http_upload") return [];
  let held: Set<string>;
  try {
    const { backend } = await openConfiguredSource(options);
    held = await withBackend(backend, async (source) => {
      const found = await discoverBundles(source, "", { signal: options.signal });
      return new Set(found.map((bundle) => bundle.path));
    });
  } catch (error) {
    options.signal?.throwIfAborted();
    return [
      {
        code: "source_unchecked",
        message: `could not list the source of pipeline ${pipeline.id} to tell whether the pruned bundles come back at the next run: ${errorMessage(error)}`,
      },
    ];
  }
  return pruned
    .filter((candidate) => held.has(candidate.bundlePath))
    .map((candidate) => ({
      code: "bundle_in_source" as const,
      bundle_path: displayPath(candidate.bundlePath),
      message: `bundle ${displayPath(candidate.bundlePath)} is planned for pruning but its source still holds it: the next run publishes it again (remove it from the source too)`,
    }));
}

/** Parent paths of the listed files called `name`, in bundle path order. */
function namedFiles(entries: readonly StorageEntry[], name: string): string[] {
  return entries
    .filter(
      (entry) =>
        entry.kind === "file" &&
        entry.nameProblem === undefined &&
        (entry.path === name || entry.path.endsWith(`/${name}`)),
    )
    .map((entry) => parentPath(entry.path))
    .sort(compareLogicalPaths);
}

/** The state without `owner`'s records at `paths`, with a new `updated_at`. */
function withoutOwnerOutputs(
  document: StateDocument,
  owner: OwnerScope,
  paths: readonly string[],
  now: Date,
): StateDocument {
  const gone = new Set(paths);
  if (isSharedRootState(document)) {
    return { ...removeMissingOwnerOutputs(document, owner, paths).state, updatedAt: now };
  }
  // `published_at` stays: a state left like this is still ranked where it was.
  return {
    ...document,
    outputs: document.outputs.filter((o) => !gone.has(o.path)),
    updatedAt: now,
  };
}

/** A shared-root state without `owner` (who records no output there any more). */
function withoutOwner(document: StateDocument, owner: OwnerScope, now: Date): StateDocument {
  if (!isSharedRootState(document)) return document;
  return {
    ...document,
    owners: document.owners.filter((o) => !sameOwnerScope(o.scope, owner)),
    outputs: document.outputs.filter((o) => !sameOwnerScope(o.owner, owner)),
    updatedAt: now,
  };
}
