import {
  allManagedOutputPaths,
  assertSingleOwnerScope,
  isSharedRootState,
  managedOutputPaths,
  type OwnerScope,
  ownerScope,
  removeMissingOutputs,
  removeMissingOwnerOutputs,
  removeMissingSharedRootOutputs,
  type SharedRootState,
  type SingleOwnerState,
  sameOwnerScope,
  truncateToSecond,
} from "@distributor/state";
import {
  compareLogicalPaths,
  isStorageError,
  STATE_FILE_NAME,
  type StorageBackend,
} from "@distributor/storage";
import type { Config } from "../config/types.js";
import { mapPool } from "../publish/pool.js";
import { destinationRootPath, readRootState, writeRootState } from "./destination-root.js";
import {
  findDestination,
  findPipeline,
  openBackend,
  type WorkflowOptions,
  withBackend,
} from "./shared.js";

/** Most entries listed under a destination root while looking for unmanaged files. */
export const RECONCILE_STATE_WALK_LIMIT = 10_000;
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

/** A file under the destination root that no state record manages. */
export interface ReconcileStateEntry {
  path: string;
  type: "file";
  /** Omitted for empty files. */
  size?: number;
}

/** What `reconcile-state` found and did; the CLI prints it as the JSON `result`. */
export interface ReconcileStateReport {
  pipeline_id: string;
  destination_id: string;
  /** Backend name of the destination (`local`, `s3`, `ssh`). */
  backend: string;
  /** The destination's configured root (see `destinationRootPath`). */
  root_path: string;
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
  const pipeline = findPipeline(options.config, options.pipelineId);
  const destination = findDestination(pipeline, options.destinationId);
  const dryRun = options.dryRun ?? false;
  const { signal } = options;
  const backend = await openBackend(options.backends, destination.location, {
    role: "destination",
    dryRun,
    secrets: options.config.secrets,
    ...(signal === undefined ? {} : { signal }),
  });
  return withBackend(backend, async () => {
    const document = await readRootState(backend, signal);
    const scope = ownerScope(pipeline.id, destination.id);
    const base = {
      pipeline_id: pipeline.id,
      destination_id: destination.id,
      backend: destination.location.backend,
      root_path: destinationRootPath(destination),
      dry_run: dryRun,
    };
    const context: RepairContext = {
      backend,
      scope,
      allOwners: options.allOwners ?? false,
      dryRun,
      now: () => truncateToSecond(options.now?.() ?? new Date()),
      signal,
    };
    const repair = isSharedRootState(document)
      ? await repairSharedRoot(document, context)
      : await repairSingleOwner(document, context);
    return { ...base, ...repair };
  });
}

interface RepairContext {
  backend: StorageBackend;
  scope: OwnerScope;
  allOwners: boolean;
  dryRun: boolean;
  now: () => Date;
  signal: AbortSignal | undefined;
}

type RepairFields = Omit<
  ReconcileStateReport,
  "pipeline_id" | "destination_id" | "backend" | "root_path" | "dry_run"
>;

async function repairSingleOwner(
  state: SingleOwnerState,
  context: RepairContext,
): Promise<RepairFields> {
  assertSingleOwnerScope(state, context.scope);
  const managed = managedOutputPaths(state);
  const missing = await missingOutputs(context, state.outputs, () => undefined);
  const unmanaged = await unmanagedEntries(context, managed);
  let changed = false;
  if (!context.dryRun && missing.length > 0) {
    const removal = removeMissingOutputs(
      state,
      missing.map((item) => item.path),
    );
    if (removal.changed) {
      await writeRootState(
        context.backend,
        { ...removal.state, updatedAt: context.now() },
        context.signal,
      );
      changed = true;
    }
  }
  return {
    state_schema: state.schemaVersion,
    owner_scope: scopeReport(context.scope),
    checked_count: managed.length,
    missing_managed_outputs: missing,
    unmanaged_entries: unmanaged,
    changed,
    would_change: context.dryRun && missing.length > 0,
  };
}

async function repairSharedRoot(
  state: SharedRootState,
  context: RepairContext,
): Promise<RepairFields> {
  const checked = context.allOwners
    ? state.outputs
    : state.outputs.filter((output) => sameOwnerScope(output.owner, context.scope));
  const missing = await missingOutputs(context, checked, (output) => scopeReport(output.owner));
  // Every owner's paths are managed, whichever owner is being repaired.
  const unmanaged = await unmanagedEntries(context, allManagedOutputPaths(state));
  let changed = false;
  if (!context.dryRun && missing.length > 0) {
    const paths = missing.map((item) => item.path);
    const removal = context.allOwners
      ? removeMissingSharedRootOutputs(state, paths)
      : removeMissingOwnerOutputs(state, context.scope, paths);
    if (removal.changed) {
      await writeRootState(
        context.backend,
        { ...removal.state, updatedAt: context.now() },
        context.signal,
      );
      changed = true;
    }
  }
  return {
    state_schema: state.schemaVersion,
    owner_scope: {
      ...scopeReport(context.scope),
      ...(context.allOwners ? { all_owners: true } : {}),
    },
    checked_count: checked.length,
    missing_managed_outputs: missing,
    unmanaged_entries: unmanaged,
    changed,
    would_change: context.dryRun && missing.length > 0,
  };
}

/** Records whose path `stat` reports as not found, in record order. Other failures abort. */
async function missingOutputs<Output extends { path: string }>(
  context: RepairContext,
  outputs: readonly Output[],
  ownerOf: (output: Output) => ReconcileStateOwnerScope | undefined,
): Promise<ReconcileStatePath[]> {
  const { backend, signal } = context;
  const present = await mapPool(outputs, STAT_CONCURRENCY, async (output) => {
    try {
      await backend.stat(output.path, signal === undefined ? {} : { signal });
      return true;
    } catch (error) {
      if (isStorageError(error, "not_found")) return false;
      throw error;
    }
  });
  const missing: ReconcileStatePath[] = [];
  outputs.forEach((output, index) => {
    if (present[index]) return;
    const owner = ownerOf(output);
    missing.push({
      path: output.path,
      ...(owner === undefined ? {} : { owner_scope: owner }),
      storage_status: "missing",
    });
  });
  return missing;
}

/** Files under the root that are neither the state file nor any recorded output (bounded walk). */
async function unmanagedEntries(
  context: RepairContext,
  managedPaths: readonly string[],
): Promise<ReconcileStateEntry[]> {
  const managed = new Set(managedPaths);
  managed.add(STATE_FILE_NAME);
  const entries = await context.backend.walk("", {
    recursive: true,
    limit: RECONCILE_STATE_WALK_LIMIT,
    ...(context.signal === undefined ? {} : { signal: context.signal }),
  });
  return entries
    .filter((entry) => entry.kind === "file" && !managed.has(entry.path))
    .sort((a, b) => compareLogicalPaths(a.path, b.path))
    .map((entry) => ({
      path: entry.path,
      type: "file" as const,
      ...(entry.size === 0 ? {} : { size: entry.size }),
    }));
}

function scopeReport(scope: OwnerScope): ReconcileStateOwnerScope {
  return { pipeline_id: scope.pipelineId, destination_id: scope.destinationId };
}
