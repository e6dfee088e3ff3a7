import { StateError } from "./errors.js";
import { truncateToSecond } from "./time.js";
import type {
  OutputMetadata,
  OutputProjection,
  OutputRecord,
  RemovalResult,
  SingleOwnerState,
} from "./types.js";

/** The record for `path`, or undefined. One lookup; index with `outputsByPath` for many. */
export function findOutputByPath<Output extends { path: string }>(
  outputs: readonly Output[],
  path: string,
): Output | undefined {
  return outputs.find((output) => output.path === path);
}

/** Records indexed by path, so planners look each path up once instead of scanning. */
export function outputsByPath<Output extends { path: string }>(
  outputs: readonly Output[],
): Map<string, Output> {
  return new Map(outputs.map((output) => [output.path, output]));
}

/**
 * Timestamped records for planned outputs: a path already recorded in `existing` keeps its
 * `created_at`; every planned path gets `updated_at = now` (truncated to the second).
 */
export function projectOutputs(
  planned: readonly OutputProjection[],
  existing: readonly OutputRecord[],
  now: Date,
): OutputRecord[] {
  // One instant for every record of this publication: nothing changes a record's dates, and a
  // million records do not each need two objects of their own.
  const updatedAt = new Date(truncateToSecond(now));
  const existingByPath = outputsByPath(existing);
  return planned.map((output) => {
    const previous = existingByPath.get(output.path);
    return outputRecord(output, previous?.createdAt ?? updatedAt, updatedAt);
  });
}

/**
 * The cumulative output set of a merge publication: retained records in their order, with
 * planned records replacing the retained record of the same path and new paths appended.
 * A path listed twice within either list is refused: `state output path "p" is duplicated`.
 */
export function mergeOutputRecords(
  retained: readonly OutputRecord[],
  planned: readonly OutputRecord[],
): OutputRecord[] {
  rejectDuplicatePaths(retained);
  rejectDuplicatePaths(planned);
  return mergeByPath(retained, planned);
}

/** `existing` in order, each record replaced by the planned one of its path; new paths appended. */
export function mergeByPath<Output extends { path: string }>(
  existing: readonly Output[],
  planned: readonly Output[],
): Output[] {
  const outputs = [...existing];
  const indexByPath = new Map(outputs.map((output, index) => [output.path, index]));
  for (const output of planned) {
    const index = indexByPath.get(output.path);
    if (index !== undefined) {
      outputs[index] = output;
    } else {
      indexByPath.set(output.path, outputs.length);
      outputs.push(output);
    }
  }
  return outputs;
}

/** Refuses a list naming one path twice: `state output path "p" is duplicated`. */
export function rejectDuplicatePaths(outputs: readonly { path: string }[]): void {
  const seen = new Set<string>();
  for (const output of outputs) {
    if (seen.has(output.path)) {
      throw new StateError(`state output path ${JSON.stringify(output.path)} is duplicated`);
    }
    seen.add(output.path);
  }
}

/** Output paths recorded in single-owner state, in record order. */
export function managedOutputPaths(state: SingleOwnerState): string[] {
  return state.outputs.map((output) => output.path);
}

/**
 * Drops the records of outputs found missing from storage. The input is not changed; timestamps,
 * validation and writing are the caller's.
 */
export function removeMissingOutputs(
  state: SingleOwnerState,
  missingPaths: Iterable<string>,
): RemovalResult<SingleOwnerState> {
  const missing = new Set(missingPaths);
  if (missing.size === 0) return { state, changed: false };
  const outputs = state.outputs.filter((output) => !missing.has(output.path));
  const changed = outputs.length !== state.outputs.length;
  return { state: changed ? { ...state, outputs } : state, changed };
}

/**
 * A record from its projection fields and timestamps: every required field in one literal, then
 * the optional ones present (as `projectionFields` keeps them). In V8 a record spread from its
 * fields (`{ ...fields, createdAt }`) got a hidden class of its own, about 260 bytes per record,
 * and fields added after a literal's own are kept out of the object, 40 bytes more.
 */
export function outputRecord(
  fields: OutputProjection,
  createdAt: Date,
  updatedAt: Date,
): OutputRecord {
  const record = requiredRecordFields(fields, createdAt, updatedAt);
  copyOptionalFields(record, fields);
  return record;
}

/**
 * The required fields of a record in one literal (see `outputRecord`), for a caller that adds
 * the optional ones itself: a parser keeps them as it read them.
 */
export function requiredRecordFields(
  fields: OutputProjection,
  createdAt: Date,
  updatedAt: Date,
): OutputRecord {
  return {
    path: fields.path,
    kind: fields.kind,
    sourcePath: fields.sourcePath,
    sha256: fields.sha256,
    size: fields.size,
    createdAt,
    updatedAt,
  };
}

/** The projection fields of an output: a copy, without empty optional fields. */
export function projectionFields(output: OutputProjection): OutputProjection {
  const fields: OutputProjection = {
    path: output.path,
    kind: output.kind,
    sourcePath: output.sourcePath,
    sha256: output.sha256,
    size: output.size,
  };
  copyOptionalFields(fields, output);
  return fields;
}

/** The optional fields `output` sets (empty ones left out), copied onto `target`. */
function copyOptionalFields(target: OutputProjection, output: OutputProjection): void {
  if (output.transform) target.transform = output.transform;
  if (output.url) target.url = output.url;
  if (output.metadata !== undefined && hasMetadata(output.metadata)) {
    target.metadata = { ...output.metadata };
  }
  if (output.decoded !== undefined) target.decoded = { ...output.decoded };
}

/** True when `metadata` sets at least one field. */
export function hasMetadata(metadata: OutputMetadata): boolean {
  return (
    metadata.cacheControl !== undefined ||
    metadata.contentType !== undefined ||
    metadata.contentDisposition !== undefined ||
    metadata.contentEncoding !== undefined
  );
}

/**
 * True when two records' metadata say the same (absent and empty are alike), and an encoded
 * output was encoded from the same bytes.
 */
export function sameStoredForm(
  a: Pick<OutputProjection, "metadata" | "decoded">,
  b: Pick<OutputProjection, "metadata" | "decoded">,
): boolean {
  const x = a.metadata ?? {};
  const y = b.metadata ?? {};
  return (
    x.cacheControl === y.cacheControl &&
    x.contentType === y.contentType &&
    x.contentDisposition === y.contentDisposition &&
    x.contentEncoding === y.contentEncoding &&
    a.decoded?.sha256 === b.decoded?.sha256 &&
    a.decoded?.size === b.decoded?.size
  );
}
