import {
  isSharedRootState,
  mergeByPath,
  mergeOutputRecords,
  mergeOwnerOutputs,
  newSharedRootState,
  type OutputProjection,
  type OutputRecord,
  type OwnerRecord,
  type OwnerScope,
  outputRecord,
  ownerOutputs,
  projectOutputs,
  projectOwnerOutputs,
  replaceOwnerOutputs,
  type SharedRootState,
  type SingleOwnerState,
  type SourceState,
  type StateDocument,
  sameOwnerScope,
  singleOwnerAsOwnerOutputs,
  singleOwnerAsOwnerRecord,
  singleOwnerScope,
  truncateToSecond,
} from "@distributor/state";
import type { PublishAction } from "./action.js";
import type { PlannedOutput } from "./outputs.js";
import type { PublishRequest } from "./plan-types.js";

/**
 * The state document a write action leaves behind: the request's outputs recorded for its owner,
 * with what reconciliation keeps of the previous document. Pure; timestamps come from `now`.
 */
export function nextStateDocument(
  request: PublishRequest,
  previous: StateDocument | undefined,
  action: PublishAction,
): StateDocument {
  const now = truncateToSecond(request.now);
  const forced = action === "force_replace";
  const merging = action === "replace_older" && request.reconciliation === "merge";
  return request.stateMode === "shared_root"
    ? nextSharedRootState(request, previous, now, forced, merging)
    : nextSingleOwnerState(request, previous, now, merging);
}

function projections(outputs: readonly PlannedOutput[]): OutputProjection[] {
  return outputs.map((output) => {
    const projection: OutputProjection = {
      path: output.path,
      kind: output.kind,
      sourcePath: output.sourcePath,
      sha256: output.sha256,
      size: output.size,
    };
    if (output.transform !== undefined) projection.transform = output.transform;
    if (output.url !== undefined) projection.url = output.url;
    if (output.metadata !== undefined) projection.metadata = output.metadata;
    if (output.decoded !== undefined) projection.decoded = output.decoded;
    return projection;
  });
}

/** The previous single-owner state when it is this owner's own (its timestamps carry over). */
function ownSingleOwnerState(
  request: PublishRequest,
  previous: StateDocument | undefined,
): SingleOwnerState | undefined {
  if (previous === undefined || isSharedRootState(previous)) return undefined;
  return sameOwnerScope(singleOwnerScope(previous), request.owner) ? previous : undefined;
}

function nextSingleOwnerState(
  request: PublishRequest,
  previous: StateDocument | undefined,
  now: Date,
  merging: boolean,
): SingleOwnerState {
  const own = ownSingleOwnerState(request, previous);
  const planned = projectOutputs(projections(request.outputs), own?.outputs ?? [], now);
  const next: SingleOwnerState = {
    schemaVersion: 2,
    pipelineId: request.owner.pipelineId,
    destinationId: request.owner.destinationId,
    publishedAt: now,
    createdAt: own?.createdAt ?? now,
    updatedAt: now,
    state: { mode: "single_owner" },
    reconciliation: { mode: request.reconciliation },
    source: sourceState(request),
    outputs: merging && own !== undefined ? mergeOutputRecords(own.outputs, planned) : planned,
  };
  if (request.distributorVersion) next.distributorVersion = request.distributorVersion;
  if (request.primaryUrl !== undefined) next.links = { primaryUrl: request.primaryUrl };
  return next;
}

function nextSharedRootState(
  request: PublishRequest,
  previous: StateDocument | undefined,
  now: Date,
  forced: boolean,
  merging: boolean,
): SharedRootState {
  // A forced replacement clears the bundle path, other owners included (docs/design/commit-protocol.md).
  const base = forced
    ? newSharedRootState(now, request.distributorVersion)
    : sharedRootBase(request, previous, now);
  const owner: OwnerRecord = {
    scope: { ...request.owner },
    reconciliation: { mode: request.reconciliation },
    source: sourceState(request),
  };
  if (request.primaryUrl !== undefined) owner.links = { primaryUrl: request.primaryUrl };
  const planned = projectOwnerOutputs(
    projections(request.outputs),
    ownerOutputs(base, request.owner),
    owner.scope,
    request.manifest,
    now,
  );
  return merging
    ? mergeOwnerOutputs(base, owner, planned)
    : replaceOwnerOutputs(base, owner, planned);
}

function sharedRootBase(
  request: PublishRequest,
  previous: StateDocument | undefined,
  now: Date,
): SharedRootState {
  if (previous !== undefined && isSharedRootState(previous)) {
    const base: SharedRootState = { ...previous, updatedAt: now };
    delete base.distributorVersion;
    if (request.distributorVersion) base.distributorVersion = request.distributorVersion;
    return base;
  }
  const fresh = newSharedRootState(now, request.distributorVersion);
  const own = ownSingleOwnerState(request, previous);
  if (own === undefined) return fresh;
  // Migration: this owner's single-owner state becomes its record in a shared root, so merge
  // keeps its omitted outputs managed.
  return {
    ...fresh,
    createdAt: own.createdAt,
    owners: [singleOwnerAsOwnerRecord(own)],
    outputs: singleOwnerAsOwnerOutputs(own),
  };
}

/**
 * The state after adopting `request.outputs` (unmanaged files whose bytes equal outputs of the
 * request's source): added to the owner's records when the owner already records this source,
 * else recorded as a first publication of it (a new single-owner state, or a new owner of the
 * shared root beside the others). Pure; the caller checked the source and the ownership.
 */
export function adoptedStateDocument(
  request: PublishRequest,
  previous: StateDocument | undefined,
): StateDocument {
  const now = truncateToSecond(request.now);
  if (previous !== undefined && !isSharedRootState(previous)) {
    const own = ownSingleOwnerState(request, previous);
    if (own !== undefined) {
      const planned = projectOutputs(projections(request.outputs), own.outputs, now);
      return { ...own, updatedAt: now, outputs: mergeOutputRecords(own.outputs, planned) };
    }
  }
  if (previous !== undefined && isSharedRootState(previous)) {
    const owner = previous.owners.find((o) => sameOwnerScope(o.scope, request.owner));
    if (owner !== undefined) {
      const base: SharedRootState = { ...previous, updatedAt: now };
      const planned = projectOwnerOutputs(
        projections(request.outputs),
        ownerOutputs(base, request.owner),
        owner.scope,
        request.manifest,
        now,
      );
      return mergeOwnerOutputs(base, owner, planned);
    }
  }
  return nextStateDocument(request, previous, "publish_new");
}

/**
 * `document` with the records of `outputs` (paths this owner records) replaced by the outputs as
 * now planned, keeping each record's `created_at` and owner fields and giving it `updated_at =
 * now`; every other record stays as it is. The document's `updated_at` moves too (the commit
 * point of docs/design/commit-protocol.md), its publication time does not: no new source was published.
 */
export function updatedRecordsDocument(
  document: StateDocument,
  owner: OwnerScope,
  outputs: readonly PlannedOutput[],
  now: Date,
): StateDocument {
  const at = truncateToSecond(now);
  const updatedAt = new Date(at);
  const replaced = new Map(projections(outputs).map((output) => [output.path, output]));
  const update = <Record extends OutputRecord>(record: Record): Record => {
    const projection = replaced.get(record.path);
    if (projection === undefined) return record;
    if (!("owner" in record)) {
      // Built field by field from the new projection (nothing the projection lacks survives),
      // not spread: a spread record got a hidden class of its own in V8. One date for all.
      const updated = outputRecord(projection, record.createdAt, updatedAt);
      // What the projection does not say is kept, as a spread kept it; metadata and the decoded
      // digest are the projection's alone (a rule that no longer sets any clears them).
      if (updated.transform === undefined && record.transform !== undefined) {
        updated.transform = record.transform;
      }
      if (updated.url === undefined && record.url !== undefined) updated.url = record.url;
      return updated as Record;
    }
    const updated: Record = { ...record, ...projection, updatedAt };
    // A field the new projection lacks (metadata no rule sets any more) must not survive.
    if (projection.metadata === undefined) delete updated.metadata;
    if (projection.decoded === undefined) delete updated.decoded;
    return updated;
  };
  if (isSharedRootState(document)) {
    return {
      ...document,
      updatedAt: at,
      outputs: document.outputs.map((record) =>
        sameOwnerScope(record.owner, owner) ? update(record) : record,
      ),
    };
  }
  return { ...document, updatedAt: at, outputs: document.outputs.map(update) };
}

/**
 * The state after a completion (`complete`): the owner still records the same source; `written`
 * (the outputs it wrote) replace or join its records, each keeping its `created_at` and taking
 * `updated_at = now`; the records of `removed` go; every other record stays as it was. The
 * publication time stays, the document's `updated_at` moves (the commit point of docs/design/commit-protocol.md), and
 * the primary URL is the one the configuration gives now. Pure.
 */
export function completedStateDocument(
  request: PublishRequest,
  document: StateDocument,
  written: readonly PlannedOutput[],
  removed: readonly string[],
): StateDocument {
  const now = truncateToSecond(request.now);
  const gone = new Set(removed);
  if (isSharedRootState(document)) {
    const existing = ownerOutputs(document, request.owner);
    const kept = existing.filter((record) => !gone.has(record.path));
    const planned = projectOwnerOutputs(
      projections(written),
      existing,
      request.owner,
      request.manifest,
      now,
    );
    const current = document.owners.find((o) => sameOwnerScope(o.scope, request.owner));
    const owner: OwnerRecord = {
      ...(current ?? {
        scope: { ...request.owner },
        reconciliation: { mode: request.reconciliation },
        source: sourceState(request),
      }),
    };
    delete owner.links;
    if (request.primaryUrl !== undefined) owner.links = { primaryUrl: request.primaryUrl };
    return replaceOwnerOutputs({ ...document, updatedAt: now }, owner, mergeByPath(kept, planned));
  }
  const kept = document.outputs.filter((record) => !gone.has(record.path));
  const planned = projectOutputs(projections(written), document.outputs, now);
  const next: SingleOwnerState = {
    ...document,
    updatedAt: now,
    outputs: mergeOutputRecords(kept, planned),
  };
  delete next.links;
  if (request.primaryUrl !== undefined) next.links = { primaryUrl: request.primaryUrl };
  return next;
}

/** The `source` a publication records: the manifest, and its signer when it was signed. */
function sourceState(request: PublishRequest): SourceState {
  return request.signer === undefined
    ? { manifest: request.manifest }
    : { manifest: request.manifest, signer: { ...request.signer } };
}
