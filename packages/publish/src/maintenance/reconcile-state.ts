import {
  assertLayout,
  type DestinationLimit,
  type DestinationLimits,
  walkWithin,
  withStateTransaction,
} from "@distributor/engine";
import {
  allManagedOutputPaths,
  assertSingleOwnerScope,
  isSharedRootState,
  managedOutputPaths,
  type OwnerScope,
  ownerOutputs,
  ownerScope,
  type RemovalResult,
  removeMissingOutputs,
  removeMissingOwnerOutputs,
  removeMissingSharedRootOutputs,
  type StateDocument,
  truncateToSecond,
} from "@distributor/state";
import {
  compareLogicalPaths,
  displayPath,
  isStorageError,
  joinPrefix,
  LEASE_FILE_NAME,
  locatePath,
  mapBounded,
  relativeTo,
  STATE_FILE_NAME,
  type StorageBackend,
} from "@distributor/storage";
import { bundlePrefix, openConfiguredDestination } from "../backends/configured-location.js";
import { withBackend } from "../backends/registry.js";
import type { Config } from "../config/types.js";
import { WorkflowError } from "../errors.js";
import { destinationLimits } from "../shared/destination-limits.js";
import type { WorkflowOptions } from "../shared/workflow-options.js";
import {
  commitRootState,
  destinationRootPath,
  maintenanceTransaction,
  rootStateOf,
  scopeReport,
} from "./destination-root.js";
import { refuseReleaseLayout } from "./release-scope.js";
import type { ReconcileStateEntry } from "./unmanaged-entry.js";

/** Parallel `stat` calls while checking managed outputs. */
const STAT_CONCURRENCY = 8;

export interface ReconcileStateOptions extends WorkflowOptions {
  config: Config;
  /** With `destinationId`, selects the destination root (and the owner the repair is for). */
  pipelineId: string;
  destinationId: string;
  /** Shared-root state only: check and repair every owner's records, not just the selected one. */
  allOwners?: boolean;
  /** Report what would be repaired without rewriting `.distributor.json`. */
  dryRun?: boolean;
  /** How long to wait for another run's lease on the state (default 0: fail at once). */
  lockTimeoutMs?: number;
  /** Lease lifetime and renewal (tests shorten it). */
  lease?: { ttlMs?: number; renew?: boolean };
  /** Most entries listed below the root; default the destination's `max_entries`. */
  listingLimit?: number;
  /**
   * The destination bundle path whose state is maintained (`.` or absent: the destination root).
   * A `preserve_relative` destination keeps a state per bundle path.
   */
  bundlePath?: string | undefined;
}

/** The owner a repair is scoped to. */
export interface ReconcileStateOwnerScope {
  pipeline_id: string;
  destination_id: string;
  /** Present (true) only for shared-root state repaired with `allOwners`. */
  all_owners?: boolean;
}

/** A managed output recorded in state whose path no longer exists in storage. */
export interface ReconcileStatePath {
  path: string;
  /** The output's owner; shared-root state only. */
  owner_scope?: ReconcileStateOwnerScope;
  storage_status: "missing";
}

/** What `reconcile-state` found and did; the CLI prints it as the JSON `result`. */
export interface ReconcileStateReport {
  pipeline_id: string;
  destination_id: string;
  /** Backend name of the destination (`local`, `s3`, `ssh`). */
  backend: string;
  /** The destination's configured root (see `destinationRootPath`). */
  root_path: string;
  /**
   * The bundle path whose state was maintained (`--bundle-path`); absent for the destination
   * root, so that the report of a root is the reference's.
   */
  bundle_path?: string;
  /** Schema of the parsed state: 2 (single-owner, also for a schema 1 file) or 3 (shared-root). */
  state_schema: number;
  owner_scope: ReconcileStateOwnerScope;
  /** Managed output records checked against storage. */
  checked_count: number;
  missing_managed_outputs: ReconcileStatePath[];
  unmanaged_entries: ReconcileStateEntry[];
  /** The state file was rewritten. */
  changed: boolean;
  /** A dry run found records that a repair would remove. */
  would_change: boolean;
  dry_run: boolean;
}

/**
 * Repairs the state at the root of one configured destination: every managed output record in
 * scope is checked with `stat`, records of missing outputs are removed (unless `dryRun`) and the
 * state is rewritten with a new `updated_at`. Files under the root that no owner manages are
 * reported, never deleted or adopted; digests are not checked. Single-owner state must belong to
 * the selected pipeline/destination; shared-root repair is limited to that owner unless
 * `allOwners`. Invalid state fails and is left as it is.
 */
export async function reconcileState(
  options: ReconcileStateOptions,
): Promise<ReconcileStateReport> {
  const dryRun = options.dryRun ?? false;
  refuseReleaseLayout(
    options.config,
    options,
    "reconcile-state",
    "`distributor audit` checks the release in force, `run --repair` restores it into a new release, and `distributor rollback` returns to a committed one",
  );
  const { pipeline, destination, backend } = await openConfiguredDestination(options, dryRun);
  const { signal } = options;
  const owner = ownerScope(pipeline.id, destination.id);
  const limits = destinationLimits(pipeline.id, destination);
  const listing =
    options.listingLimit === undefined ? limits.entries : { value: options.listingLimit };
  const transaction = maintenanceTransaction(options, limits, dryRun);
  const bundle = bundlePrefix(options.bundlePath ?? ".");
  return withBackend(backend, () =>
    withStateTransaction(backend, bundle, owner, transaction, async (tx) => {
      await assertLayout(backend, bundle, "in_place", {
        maxStateBytes: limits.stateBytes.value,
        signal,
      });
      const document = await bundleStateOf(backend, bundle, tx.read, signal, limits);
      const scope = repairScope(document, owner, options);
      const missing = await missingOutputs(backend, bundle, scope.checked, signal);
      const unmanaged = await unmanagedEntries(backend, bundle, scope.managed, listing, signal);
      let changed = false;
      if (!tx.dryRun && missing.length > 0) {
        const removal = scope.remove(missing.map((item) => item.path));
        if (removal.changed) {
          const now = truncateToSecond(options.now?.() ?? new Date());
          // Only records go, no file: nothing to journal, the commit is the whole change.
          await commitRootState(backend, tx, { ...removal.state, updatedAt: now }, bundle);
          changed = true;
        }
      }
      return {
        pipeline_id: pipeline.id,
        destination_id: destination.id,
        backend: destination.location.backend,
        root_path: destinationRootPath(destination),
        ...(bundle === "" ? {} : { bundle_path: displayPath(bundle) }),
        state_schema: document.schemaVersion,
        owner_scope: scope.ownerScope,
        checked_count: scope.checked.length,
        missing_managed_outputs: missing,
        unmanaged_entries: unmanaged,
        changed,
        would_change: dryRun && missing.length > 0,
        dry_run: dryRun,
      };
    }),
  );
}

/** What a repair of one state document checks and how it removes missing records. */
interface RepairScope {
  ownerScope: ReconcileStateOwnerScope;
  /** Records checked against storage; shared-root records carry their owner. */
  checked: ReadonlyArray<{ path: string; owner?: OwnerScope }>;
  /** Every managed path, whichever owner is repaired: none of them is unmanaged. */
  managed: readonly string[];
  remove(missingPaths: readonly string[]): RemovalResult<StateDocument>;
}

function repairScope(
  document: StateDocument,
  scope: OwnerScope,
  options: Pick<ReconcileStateOptions, "allOwners">,
): RepairScope {
  if (!isSharedRootState(document)) {
    assertSingleOwnerScope(document, scope);
    return {
      ownerScope: scopeReport(scope),
      checked: document.outputs,
      managed: managedOutputPaths(document),
      remove: (paths) => removeMissingOutputs(document, paths),
    };
  }
  const allOwners = options.allOwners ?? false;
  return {
    ownerScope: { ...scopeReport(scope), ...(allOwners ? { all_owners: true } : {}) },
    checked: allOwners ? document.outputs : ownerOutputs(document, scope),
    managed: allManagedOutputPaths(document),
    remove: (paths) =>
      allOwners
        ? removeMissingSharedRootOutputs(document, paths)
        : removeMissingOwnerOutputs(document, scope, paths),
  };
}

/** The state of `bundle` as the transaction read it; `state_not_found` when there is none. */
async function bundleStateOf(
  backend: StorageBackend,
  bundle: string,
  read: Parameters<typeof rootStateOf>[1],
  signal: AbortSignal | undefined,
  limits: DestinationLimits,
): Promise<StateDocument> {
  if (bundle === "") {
    return rootStateOf(
      backend,
      read,
      signal,
      limits,
      (first) =>
        `name one with --bundle-path (\`distributor reconcile-state … --bundle-path ${first}\`); \`audit\` checks every bundle path's outputs`,
    );
  }
  if (read.status.stateError !== undefined) throw read.status.stateError;
  if (read.status.state !== undefined) return read.status.state;
  throw new WorkflowError(
    "state_not_found",
    `${locatePath(backend.location, joinPrefix(bundle, STATE_FILE_NAME))} does not exist, so nothing is managed at bundle path ${bundle}; \`distributor audit\` lists the bundle paths that keep a state`,
  );
}

/** Records whose path `stat` reports as not found, in record order. Other failures abort. */
async function missingOutputs(
  backend: StorageBackend,
  bundle: string,
  outputs: RepairScope["checked"],
  signal: AbortSignal | undefined,
): Promise<ReconcileStatePath[]> {
  const present = await mapBounded(outputs, STAT_CONCURRENCY, async (output) => {
    try {
      await backend.stat(joinPrefix(bundle, output.path), { signal });
      return true;
    } catch (error) {
      if (isStorageError(error, "not_found")) return false;
      throw error;
    }
  });
  return outputs
    .filter((_, index) => !present[index])
    .map((output) => ({
      path: output.path,
      ...(output.owner === undefined ? {} : { owner_scope: scopeReport(output.owner) }),
      storage_status: "missing" as const,
    }));
}

/**
 * Entries under the bundle path that are neither the state file nor any recorded output (bounded
 * walk): files, symlinks, special files, and anything whose name is not a logical path. Paths
 * are relative to the bundle path; a nested bundle path with a state of its own is not looked in.
 */
async function unmanagedEntries(
  backend: StorageBackend,
  bundle: string,
  managedPaths: readonly string[],
  limit: DestinationLimit,
  signal: AbortSignal | undefined,
): Promise<ReconcileStateEntry[]> {
  const managed = new Set(managedPaths);
  managed.add(STATE_FILE_NAME);
  // The lease of a run holding the state (ours, unless this is a dry run) is not content.
  managed.add(LEASE_FILE_NAME);
  const entries = (await walkWithin(backend, bundle, limit, { recursive: true, signal })).map(
    (entry) => ({ ...entry, path: bundle === "" ? entry.path : relativeTo(bundle, entry.path) }),
  );
  const nested =
    bundle === ""
      ? []
      : entries
          .filter((entry) => entry.kind === "file" && entry.path.endsWith(`/${STATE_FILE_NAME}`))
          .map((entry) => entry.path.slice(0, -STATE_FILE_NAME.length));
  return entries
    .filter((entry) => {
      if (nested.some((prefix) => entry.path.startsWith(prefix))) return false;
      if (entry.nameProblem !== undefined) return true;
      return entry.kind !== "directory" && !managed.has(entry.path);
    })
    .sort((a, b) => compareLogicalPaths(a.path, b.path))
    .map((entry) => ({
      path: entry.path,
      type: entry.kind,
      ...(entry.size === 0 ? {} : { size: entry.size }),
    }));
}
