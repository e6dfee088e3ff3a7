import {
  discoverBundles,
  type Manifest,
  readManifest,
  selectNewestBundle,
  validateBundle,
} from "@distributor/bundle";
import {
  adoptedStateDocument,
  assertLayout,
  attachUrls,
  type DestinationLimits,
  type PlannedOutput,
  type PublishRequest,
  prepareOutputs,
  storedFile,
  storedMetadataMatches,
  walkWithin,
  withStateTransaction,
} from "@distributor/engine";
import { type OwnerScope, ownerScope, sameOwnerScope } from "@distributor/state";
import {
  compareLogicalPaths,
  displayPath,
  isStorageError,
  isWithinPrefix,
  joinPrefix,
  relativeTo,
  STATE_FILE_NAME,
  type StorageBackend,
  type StorageEntry,
} from "@distributor/storage";
import {
  bundlePrefix,
  findDestination,
  findPipeline,
  openConfiguredDestination,
  sourceLocation,
} from "../backends/configured-location.js";
import { openBackend, withBackend } from "../backends/registry.js";
import type { DestinationConfig, PipelineConfig } from "../config/types.js";
import { errorCode, errorMessage, WorkflowError } from "../errors.js";
import { destinationLimits } from "../shared/destination-limits.js";
import { noBundlesError } from "../shared/no-bundles.js";
import { destinationSelection } from "../shared/selection.js";
import { AdoptRefusal, checkPrecondition, recordedOwners } from "./adopt-precondition.js";
import type { AdoptBundleReport, AdoptOptions, AdoptReport } from "./adopt-types.js";
import { destinationRootPath, maintenanceTransaction, scopeReport } from "./destination-root.js";
import { refuseReleaseLayout } from "./release-scope.js";
import { restoreReleaseState } from "./restore-release-state.js";
import {
  isUnmanagedEntry,
  type ReconcileStateEntry,
  unmanagedEntryReport,
} from "./unmanaged-entry.js";

/**
 * Takes over what another tool put at a destination (`adopt`), or replaces a state that cannot
 * be read (`rebuild`), from the current source and the bytes actually stored — never writing or
 * deleting an output. For every bundle path the source publishes at this destination: the
 * outputs the source would publish there are compared with what is stored (digest and size);
 * those equal and not recorded by any owner are recorded, everything else stays unmanaged and
 * is reported. `adopt` adds to an absent state or to one that already records the current
 * source for this owner; `rebuild` needs a state that is invalid and writes a new one (other
 * owners of an unreadable shared root cannot be known, and their files become unmanaged). The
 * only write is the state's compare-and-swap, under the bundle path's lease, after journaling.
 */
export async function adoptOutputs(options: AdoptOptions): Promise<AdoptReport> {
  const dryRun = options.dryRun ?? false;
  if (options.mode === "rebuild" && layoutOf(options) === "releases") {
    return restoreReleaseState(options);
  }
  refuseReleaseLayout(
    options.config,
    options,
    `reconcile-state --${options.mode}`,
    "publish the bundle with `distributor run` (each publication is a release of its own), or `distributor rollback` to a committed release",
  );
  const { pipeline, destination, backend } = await openConfiguredDestination(options, dryRun);
  const owner = ownerScope(pipeline.id, destination.id);
  return withBackend(backend, async () => {
    const report: AdoptReport = {
      pipeline_id: pipeline.id,
      destination_id: destination.id,
      backend: destination.location.backend,
      root_path: destinationRootPath(destination),
      mode: options.mode,
      owner_scope: scopeReport(owner),
      bundles: [],
      changed: false,
      would_change: false,
      failed: false,
      dry_run: dryRun,
    };
    const source = await openBackend(options.backends, sourceLocation(pipeline), {
      role: "source",
      dryRun: true,
      secrets: options.config.secrets,
      ...(options.signal ? { signal: options.signal } : {}),
    });
    await withBackend(source, async () => {
      const targets = only(
        await sourceTargets(source, pipeline, destination, options.signal),
        options.bundlePath,
      );
      for (const target of targets) {
        options.signal?.throwIfAborted();
        const bundle = await adoptBundle(options, backend, source, destination, owner, target);
        report.bundles.push(bundle);
        report.changed ||= bundle.changed;
        report.would_change ||= bundle.would_change;
        report.failed ||= bundle.error !== null;
      }
    });
    return report;
  });
}

/** The target at `bundlePath` alone, when one is asked for (`--bundle-path`). */
function only(targets: SourceTarget[], bundlePath: string | undefined): SourceTarget[] {
  if (bundlePath === undefined) return targets;
  const wanted = bundlePrefix(bundlePath);
  const found = targets.filter((target) => target.bundlePath === wanted);
  if (found.length > 0) return found;
  const published = targets.map((target) => displayPath(target.bundlePath)).join(", ");
  throw new WorkflowError(
    "bundle_path_not_published",
    `no bundle of the current source publishes to bundle path ${displayPath(wanted)} at this destination (it publishes to: ${published || "none"})`,
  );
}

interface SourceTarget {
  /** Root-relative source bundle path. */
  sourcePath: string;
  manifest: Manifest;
  bundlePath: string;
}

/** Where the current source publishes at this destination, its bundles validated in full. */
async function sourceTargets(
  source: StorageBackend,
  pipeline: PipelineConfig,
  destination: DestinationConfig,
  signal: AbortSignal | undefined,
): Promise<SourceTarget[]> {
  const discovered = await discoverBundles(source, "", { signal });
  if (discovered.length === 0) throw await noBundlesError(pipeline, source);
  const bundles: { path: string; manifest: Manifest }[] = [];
  for (const found of discovered) {
    const manifest = await readManifest(source, found.bundlePath, {
      signal,
      maxFiles: pipeline.validation.maxFiles,
    });
    // The bytes adopted are recorded as this source's: it must be exactly what it claims.
    await validateBundle(source, found.bundlePath, {
      unlistedFiles: pipeline.validation.unlistedFiles,
      maxFiles: pipeline.validation.maxFiles,
      maxTotalSize: pipeline.validation.maxTotalSize,
      portableNames: pipeline.validation.portableNames ? "refuse" : "warn",
      manifest,
      ...(signal ? { signal } : {}),
    });
    bundles.push({ path: found.path, manifest });
  }
  if (destination.pathMapping.mode === "fixed") {
    const newest = selectNewestBundle(bundles);
    return newest === undefined
      ? []
      : [{ sourcePath: newest.path, manifest: newest.manifest, bundlePath: "" }];
  }
  return bundles.map((b) => ({ sourcePath: b.path, manifest: b.manifest, bundlePath: b.path }));
}

async function adoptBundle(
  options: AdoptOptions,
  backend: StorageBackend,
  source: StorageBackend,
  destination: DestinationConfig,
  owner: OwnerScope,
  target: SourceTarget,
): Promise<AdoptBundleReport> {
  const dryRun = options.dryRun ?? false;
  const { signal } = options;
  const limits = destinationLimits(owner.pipelineId, destination);
  const report: AdoptBundleReport = {
    bundle_path: displayPath(target.bundlePath),
    source_id: target.manifest.id,
    state_before: "absent",
    adopted_outputs: [],
    managed_count: 0,
    unmatched_outputs: [],
    unmanaged_entries: [],
    changed: false,
    would_change: false,
    error: null,
  };
  const selection = destinationSelection(destination, target.manifest, target.bundlePath);
  const prepared = await prepareOutputs(selection, {
    source,
    sourceBundlePath: target.sourcePath,
    manifest: target.manifest,
    signal,
  });
  const { outputs, primaryUrl } = attachUrls(prepared, target.bundlePath, destination.links);
  // A bundle path published as releases is not adopted in place: the verdict every command gives.
  await assertLayout(backend, target.bundlePath, "in_place", {
    maxStateBytes: limits.stateBytes.value,
    signal,
  });

  // Set once the state is journaled: a failure from there on is this bundle path's, reported.
  let committing = false;
  try {
    return await withStateTransaction(
      backend,
      target.bundlePath,
      owner,
      maintenanceTransaction(options, limits, dryRun),
      async (tx) => {
        // Read under the lease: nobody else changes this state until it is released.
        const { status } = tx.read;
        report.state_before =
          status.stateError !== undefined
            ? "invalid"
            : status.state === undefined
              ? "absent"
              : "valid";
        const previous = checkPrecondition(options.mode, status, owner, target, destination);
        const entries = await listBundlePath(backend, target.bundlePath, signal, limits);
        const recorded = recordedOwners(previous);
        const adopted = await adoptable(
          backend,
          target,
          outputs,
          entries,
          recorded,
          owner,
          report,
          signal,
        );
        const managed = new Set([...recorded.keys(), ...adopted.map((output) => output.path)]);
        report.unmanaged_entries = unmanagedEntries(target.bundlePath, entries, managed);

        const writes = options.mode === "rebuild" || adopted.length > 0;
        if (!writes) return report;
        if (tx.dryRun) {
          report.would_change = true;
          return report;
        }
        const request: PublishRequest = {
          owner,
          manifest: target.manifest,
          bundlePath: target.bundlePath,
          stateMode: destination.state.mode,
          reconciliation: destination.reconciliation.mode,
          pathMapping: destination.pathMapping.mode,
          transfer: destination.transfer,
          force: false,
          outputs: adopted,
          primaryUrl,
          now: options.now?.() ?? new Date(),
          distributorVersion: options.distributorVersion,
        };
        // Encoded (validated, size-checked) before the journal: a state that cannot be written
        // costs the destination nothing.
        const next = tx.prepare(adoptedStateDocument(request, previous));
        // Step journal: no output is written; only the state's temp file may appear.
        await tx.journal({ directories: [""] });
        committing = true;
        // The only write of an adoption: the state's compare-and-swap.
        await tx.commit(next);
        report.changed = true;
        return report;
      },
    );
  } catch (error) {
    if (error instanceof AdoptRefusal) {
      report.error = { code: error.code, message: error.message };
      return report;
    }
    // Not known to be committed: the transaction abandoned its lease for the next run.
    if (committing) {
      report.error = { code: errorCode(error), message: errorMessage(error) };
      return report;
    }
    throw error;
  }
}

/**
 * The outputs of the source that may be recorded as adopted: stored, not recorded by any owner,
 * and holding exactly what the rules would store. Every other output is reported as unmatched
 * (or, recorded for this owner, counted as managed).
 */
async function adoptable(
  backend: StorageBackend,
  target: SourceTarget,
  outputs: readonly PlannedOutput[],
  entries: readonly StorageEntry[],
  recorded: ReadonlyMap<string, OwnerScope>,
  owner: OwnerScope,
  report: AdoptBundleReport,
  signal: AbortSignal | undefined,
): Promise<PlannedOutput[]> {
  const stored = new Set(
    entries
      .filter((e) => e.nameProblem === undefined)
      .map((e) => relativeTo(target.bundlePath, e.path)),
  );
  const adopted: PlannedOutput[] = [];
  for (const output of outputs) {
    const by = recorded.get(output.path);
    if (by !== undefined) {
      if (sameOwnerScope(by, owner)) report.managed_count += 1;
      else report.unmatched_outputs.push({ path: output.path, reason: "other_owner" });
      continue;
    }
    if (!stored.has(output.path)) {
      report.unmatched_outputs.push({ path: output.path, reason: "missing" });
      continue;
    }
    const found = await storedFile(backend, joinPrefix(target.bundlePath, output.path), signal);
    // Adopted only as stored the way the rules would store it: bytes and headers alike, so
    // the record never claims metadata the object lacks.
    if (
      found.kind === "file" &&
      found.sha256 === output.sha256 &&
      found.size === output.size &&
      storedMetadataMatches(found.metadata, output.metadata)
    ) {
      adopted.push(output);
      report.adopted_outputs.push({ path: output.path, sha256: output.sha256, size: output.size });
    } else {
      report.unmatched_outputs.push({
        path: output.path,
        reason: found.kind === "missing" ? "missing" : "different",
      });
    }
  }
  return adopted;
}

/** Everything below a bundle path, bounded; a missing path lists nothing. */
async function listBundlePath(
  backend: StorageBackend,
  bundlePath: string,
  signal: AbortSignal | undefined,
  limits: DestinationLimits,
): Promise<StorageEntry[]> {
  try {
    return await walkWithin(backend, bundlePath, limits.entries, { recursive: true, signal });
  } catch (error) {
    if (isStorageError(error, "not_found")) return [];
    throw error;
  }
}

/**
 * Entries below the bundle path that stay unmanaged: not recorded (or adopted), not
 * distributor's own files, and not inside a nested bundle path that has a state of its own.
 */
function unmanagedEntries(
  bundlePath: string,
  entries: readonly StorageEntry[],
  managed: ReadonlySet<string>,
): ReconcileStateEntry[] {
  const nested = entries
    .filter(
      (e) =>
        e.kind === "file" &&
        e.nameProblem === undefined &&
        e.path.endsWith(`/${STATE_FILE_NAME}`) &&
        e.path !== joinPrefix(bundlePath, STATE_FILE_NAME),
    )
    .map((e) => e.path.slice(0, -(STATE_FILE_NAME.length + 1)));
  return entries
    .filter((entry) => {
      if (nested.some((dir) => isWithinPrefix(dir, entry.path))) return false;
      return isUnmanagedEntry(bundlePath, entry, managed);
    })
    .sort((a, b) => compareLogicalPaths(a.path, b.path))
    .map(unmanagedEntryReport);
}

/** The configured layout of the selected destination. */
function layoutOf(options: AdoptOptions): "in_place" | "releases" {
  return findDestination(findPipeline(options.config, options.pipelineId), options.destinationId)
    .layout.mode;
}
