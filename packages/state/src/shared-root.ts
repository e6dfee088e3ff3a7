import type { Manifest } from "@distributor/bundle";
import { StateError } from "./errors.js";
import {
  findOutputByPath,
  mergeByPath,
  outputsByPath,
  projectionFields,
  rejectDuplicatePaths,
} from "./outputs.js";
import { formatOwnerScope, sameOwnerScope } from "./scope.js";
import { truncateToSecond } from "./time.js";
import {
  type OutputProjection,
  type OwnerRecord,
  type OwnerScope,
  type PathOwnershipConflict,
  type RemovalResult,
  SHARED_ROOT_SCHEMA_VERSION,
  type SharedRootOutputRecord,
  type SharedRootState,
  type SingleOwnerState,
} from "./types.js";

/** The owner record of `scope`, or undefined when that owner has not published here. */
export function findOwner(state: SharedRootState, scope: OwnerScope): OwnerRecord | undefined {
  return state.owners.find((owner) => sameOwnerScope(owner.scope, scope));
}

/** The latest source manifest `scope` published here, or undefined. */
export function ownerSourceManifest(
  state: SharedRootState,
  scope: OwnerScope,
): Manifest | undefined {
  return findOwner(state, scope)?.source.manifest;
}

/** Output records owned by `scope`, in record order. */
export function ownerOutputs(state: SharedRootState, scope: OwnerScope): SharedRootOutputRecord[] {
  return state.outputs.filter((output) => sameOwnerScope(output.owner, scope));
}

/** Output records of every owner except `scope`, in record order. */
export function otherOwnerOutputs(
  state: SharedRootState,
  scope: OwnerScope,
): SharedRootOutputRecord[] {
  return state.outputs.filter((output) => !sameOwnerScope(output.owner, scope));
}

/** Paths managed by one owner. */
export function ownerManagedOutputPaths(state: SharedRootState, scope: OwnerScope): string[] {
  return ownerOutputs(state, scope).map((output) => output.path);
}

/** Paths managed by any owner. */
export function allManagedOutputPaths(state: SharedRootState): string[] {
  return state.outputs.map((output) => output.path);
}

/** The owner of a managed path, or undefined when no owner records it. */
export function outputOwner(state: SharedRootState, path: string): OwnerScope | undefined {
  return findOutputByPath(state.outputs, path)?.owner;
}

/** The first of `paths` that another owner than `scope` already manages, or undefined. */
export function pathOwnershipConflict(
  state: SharedRootState,
  scope: OwnerScope,
  paths: Iterable<string>,
): PathOwnershipConflict | undefined {
  const recorded = outputsByPath(state.outputs);
  for (const path of paths) {
    const owner = recorded.get(path)?.owner;
    if (owner !== undefined && !sameOwnerScope(owner, scope)) return { path, owner };
  }
  return undefined;
}

/**
 * Timestamped shared-root records for planned outputs of `scope`, carrying the source identity.
 * A path `scope` already owns in `existing` keeps its `created_at`; `updated_at` is `now`.
 */
export function projectOwnerOutputs(
  planned: readonly OutputProjection[],
  existing: readonly SharedRootOutputRecord[],
  scope: OwnerScope,
  source: Manifest,
  now: Date,
): SharedRootOutputRecord[] {
  const updatedAt = truncateToSecond(now);
  const existingByPath = outputsByPath(existing);
  return planned.map((output) => {
    const previous = existingByPath.get(output.path);
    const keepCreated = previous !== undefined && sameOwnerScope(previous.owner, scope);
    // Assigned onto the fresh projection rather than spread: see `withTimestamps` in outputs.ts.
    return Object.assign(projectionFields(output), {
      owner: { ...scope },
      sourceId: source.id,
      sourceDigest: source.digest,
      sourceCreated: truncateToSecond(source.created),
      createdAt: new Date(keepCreated ? previous.createdAt : updatedAt),
      updatedAt: new Date(updatedAt),
    });
  });
}

/**
 * The state after a `replace` publication of `owner`: its record is inserted or updated, its
 * previous outputs are dropped, `planned` is appended; other owners' records and outputs are
 * kept as they were. Refuses planned paths owned by another owner and planned records not
 * owned by `owner`. Timestamps of the state itself are the caller's.
 */
export function replaceOwnerOutputs(
  state: SharedRootState,
  owner: OwnerRecord,
  planned: readonly SharedRootOutputRecord[],
): SharedRootState {
  checkPlannedOwnerOutputs(state, owner.scope, planned);
  return {
    ...state,
    owners: upsertOwner(state.owners, owner),
    outputs: [...otherOwnerOutputs(state, owner.scope), ...planned],
  };
}

/**
 * The state after a `merge` publication of `owner`: existing outputs stay in place, planned
 * records replace the record of the same path, new paths are appended. Same refusals as
 * `replaceOwnerOutputs`.
 */
export function mergeOwnerOutputs(
  state: SharedRootState,
  owner: OwnerRecord,
  planned: readonly SharedRootOutputRecord[],
): SharedRootState {
  checkPlannedOwnerOutputs(state, owner.scope, planned);
  return {
    ...state,
    owners: upsertOwner(state.owners, owner),
    outputs: mergeByPath(state.outputs, planned),
  };
}

/** Drops missing records of one owner only; other owners' records are never touched. */
export function removeMissingOwnerOutputs(
  state: SharedRootState,
  scope: OwnerScope,
  missingPaths: Iterable<string>,
): RemovalResult<SharedRootState> {
  const missing = new Set(missingPaths);
  return removeOutputs(
    state,
    (output) => sameOwnerScope(output.owner, scope) && missing.has(output.path),
  );
}

/** Drops missing records of every owner (`reconcile-state --all-owners`). */
export function removeMissingSharedRootOutputs(
  state: SharedRootState,
  missingPaths: Iterable<string>,
): RemovalResult<SharedRootState> {
  const missing = new Set(missingPaths);
  return removeOutputs(state, (output) => missing.has(output.path));
}

/** Empty shared-root state, for the first publication into a shared root. */
export function newSharedRootState(now: Date, distributorVersion?: string): SharedRootState {
  const createdAt = truncateToSecond(now);
  const state: SharedRootState = {
    schemaVersion: SHARED_ROOT_SCHEMA_VERSION,
    createdAt,
    updatedAt: new Date(createdAt),
    state: { mode: "shared_root" },
    owners: [],
    outputs: [],
  };
  if (distributorVersion) state.distributorVersion = distributorVersion;
  return state;
}

/**
 * The owner record that compatible single-owner state becomes when its destination moves to
 * `state.mode: shared_root` (migration).
 */
export function singleOwnerAsOwnerRecord(state: SingleOwnerState): OwnerRecord {
  const owner: OwnerRecord = {
    scope: { pipelineId: state.pipelineId, destinationId: state.destinationId },
    reconciliation: { ...state.reconciliation },
    source: { manifest: state.source.manifest },
  };
  if (state.links !== undefined) owner.links = { ...state.links };
  return owner;
}

/** The single-owner output records as shared-root records of their owner (migration). */
export function singleOwnerAsOwnerOutputs(state: SingleOwnerState): SharedRootOutputRecord[] {
  const manifest = state.source.manifest;
  return state.outputs.map((output) => ({
    ...output,
    owner: { pipelineId: state.pipelineId, destinationId: state.destinationId },
    sourceId: manifest.id,
    sourceDigest: manifest.digest,
    sourceCreated: truncateToSecond(manifest.created),
  }));
}

function checkPlannedOwnerOutputs(
  state: SharedRootState,
  scope: OwnerScope,
  planned: readonly SharedRootOutputRecord[],
): void {
  const conflict = pathOwnershipConflict(
    state,
    scope,
    planned.map((output) => output.path),
  );
  if (conflict !== undefined) {
    throw new StateError(
      `state output path ${JSON.stringify(conflict.path)} is owned by ${formatOwnerScope(conflict.owner)}`,
    );
  }
  rejectDuplicatePaths(planned);
  for (const output of planned) {
    if (!sameOwnerScope(output.owner, scope)) {
      throw new StateError(
        `state output path ${JSON.stringify(output.path)} is owned by ${formatOwnerScope(output.owner)}, not ${formatOwnerScope(scope)}`,
      );
    }
  }
}

function upsertOwner(owners: readonly OwnerRecord[], owner: OwnerRecord): OwnerRecord[] {
  const index = owners.findIndex((existing) => sameOwnerScope(existing.scope, owner.scope));
  if (index === -1) return [...owners, owner];
  return owners.map((existing, at) => (at === index ? owner : existing));
}

function removeOutputs(
  state: SharedRootState,
  remove: (output: SharedRootOutputRecord) => boolean,
): RemovalResult<SharedRootState> {
  const outputs = state.outputs.filter((output) => !remove(output));
  const changed = outputs.length !== state.outputs.length;
  return { state: changed ? { ...state, outputs } : state, changed };
}
