import {
  type DecodedDigest,
  isSharedRootState,
  type OutputKind,
  type OutputMetadata,
  type OwnerScope,
  ownerOutputs,
  type StateDocument,
  sameOwnerScope,
  singleOwnerScope,
} from "@distributor/state";
import { runSteps, type Steps } from "@distributor/storage";
import { sameMetadata } from "../content/metadata.js";
import type { ActionDecision } from "./action.js";
import type { OutputSelection, PlannedOutput } from "./outputs.js";
import type {
  DestinationInspection,
  PublishPlan,
  PublishRequest,
  PublishTarget,
} from "./plan-types.js";

// What the planner reads from recorded outputs, shared by every kind of plan.

export const MAX_LISTED_PATHS = 5;

export function listPaths(paths: readonly string[]): string {
  const shown = paths.slice(0, MAX_LISTED_PATHS).join(", ");
  return paths.length > MAX_LISTED_PATHS
    ? `${shown} (and ${paths.length - MAX_LISTED_PATHS} more)`
    : shown;
}

/** A plan of `decision` that does nothing yet: the steps below fill in what it writes and deletes. */
export function emptyPlan(
  request: PublishRequest,
  inspection: DestinationInspection,
  decision: ActionDecision,
  outputs: PublishPlan["outputs"],
  primaryUrl: PublishPlan["primaryUrl"],
): PublishPlan {
  return {
    ...decision,
    bundlePath: request.bundlePath,
    ownerScope: request.owner,
    stateMode: request.stateMode,
    reconciliation: request.reconciliation,
    manifest: request.manifest,
    outputs,
    primaryUrl,
    writes: [],
    deletesFirst: [],
    deletes: [],
    deleteVersions: {},
    clearBundlePath: false,
    keep: [],
    journal: { paths: [], directories: [], overwrites: [] },
    stateVersion: inspection.stateVersion,
    readState: inspection.status.state,
  };
}

/** The owner's records by path (none without a state). */
export function recordsByPath(
  owner: OwnerScope,
  document: StateDocument | undefined,
): Map<string, RecordedOutput> {
  const records = document === undefined ? [] : ownedOutputRecords(document, owner);
  return new Map(records.map((record) => [record.path, record]));
}

/** True when `record` already describes `output` exactly: bytes, origin and metadata. */
export function recordMatches(record: RecordedOutput | undefined, output: PlannedOutput): boolean {
  return (
    record !== undefined &&
    record.sha256 === output.sha256 &&
    record.size === output.size &&
    record.kind === output.kind &&
    record.sourcePath === output.sourcePath &&
    (record.transform ?? undefined) === (output.transform ?? undefined) &&
    sameMetadata(record.metadata, output.metadata)
  );
}

export type RecordedOutput = {
  path: string;
  kind: OutputKind;
  sourcePath: string;
  transform?: string;
  sha256: string;
  size: number;
  metadata?: OutputMetadata;
  decoded?: DecodedDigest;
};

/** The records of `owner` in a state document (none when the state is another owner's). */
export function ownedOutputRecords(
  document: StateDocument,
  owner: OwnerScope,
): ReadonlyArray<RecordedOutput> {
  if (isSharedRootState(document)) return ownerOutputs(document, owner);
  return sameOwnerScope(singleOwnerScope(document), owner) ? document.outputs : [];
}

export function recordedPrimaryUrl(document: StateDocument, owner: OwnerScope): string | undefined {
  if (!isSharedRootState(document)) return document.links?.primaryUrl;
  return document.owners.find((o) => sameOwnerScope(o.scope, owner))?.links?.primaryUrl;
}

/**
 * Paths of this owner's recorded outputs (among the planned ones) whose recorded metadata is not
 * what the destination's rules give them now. Pure; reads the state only.
 */
export function metadataChanges(target: PublishTarget, document: StateDocument): string[] {
  return runSteps(metadataChangesSteps(target, document));
}

/** `metadataChanges` as steps that pause every few thousand outputs. */
export function* metadataChangesSteps(
  target: PublishTarget,
  document: StateDocument,
): Steps<string[]> {
  if (target.planned === undefined) return [];
  const owned = ownedOutputRecords(document, target.owner);
  // Without metadata on either side (no rules, none recorded) nothing can differ: no map of
  // every planned path is needed.
  if (
    !target.planned.some((output) => output.metadata !== undefined) &&
    !owned.some((record) => record.metadata !== undefined)
  ) {
    return [];
  }
  const planned = new Map<string, OutputSelection["metadata"]>();
  for (const output of target.planned) {
    planned.set(output.path, output.metadata);
    if (planned.size % 2000 === 0) yield;
  }
  const changed: string[] = [];
  for (const [index, record] of owned.entries()) {
    if (index % 2000 === 1999) yield;
    if (!planned.has(record.path)) continue;
    if (!sameMetadata(record.metadata, planned.get(record.path))) changed.push(record.path);
  }
  return changed;
}

/**
 * True when writing `output` restores what `record` describes: the same bytes, or, for an output
 * stored encoded, the same bytes before encoding with the same metadata (compressors of other
 * zlib or brotli versions may encode the same input differently; the record then takes the new
 * encoded digest).
 */
export function reproduces(output: PlannedOutput, record: RecordedOutput): boolean {
  if (output.sha256 === record.sha256 && output.size === record.size) return true;
  return (
    record.decoded !== undefined &&
    output.decoded !== undefined &&
    record.decoded.sha256 === output.decoded.sha256 &&
    record.decoded.size === output.decoded.size &&
    sameMetadata(output.metadata, record.metadata)
  );
}
