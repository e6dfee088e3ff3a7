import type { Manifest } from "@distributor/bundle";
import type { OutputRecord, StateDocument } from "./types.js";

// Documents this package parsed: valid when parsed and frozen since, so never validated again.

/**
 * Documents `parseDocument` and its kin returned. Each was validated whole before it was returned
 * and is frozen (every object and array in it, the embedded manifests included), so it is still
 * what was validated: comparing it need not validate it again (about a second at 10⁵ outputs).
 * A changed state is a new document, built by the caller and validated when it is written.
 */
const parsedDocuments = new WeakSet<StateDocument>();

/** Embedded manifests of parsed documents: valid as parsed, and frozen by the bundle package. */
const parsedManifests = new WeakSet<Manifest>();

/**
 * Freezes one output record, by its known shape; returns it. The parser freezes each record as it
 * reads it, within the slices it is read in, so that freezing a big document is no long step.
 */
export function frozenRecord<Output extends OutputRecord>(record: Output): Output {
  if (record.metadata !== undefined) Object.freeze(record.metadata);
  if (record.decoded !== undefined) Object.freeze(record.decoded);
  if ("owner" in record) Object.freeze(record.owner);
  return Object.freeze(record);
}

/**
 * Freezes a document just validated, whose records `frozenRecord` froze as they were read, and
 * remembers it as valid; returns it.
 */
export function knownValid<Document extends StateDocument>(document: Document): Document {
  deepFreeze(document);
  parsedDocuments.add(document);
  return document;
}

/** Remembers a manifest `parseFrozenManifest` just returned for a state; returns it. */
export function parsedManifest(manifest: Manifest): Manifest {
  parsedManifests.add(manifest);
  return manifest;
}

/** True for a document this package parsed (and so validated) and nobody can have changed. */
export function isKnownValid(document: StateDocument): boolean {
  return parsedDocuments.has(document);
}

/**
 * True for an embedded manifest as it was parsed with its state: the bundle package's parser
 * accepted it, and it is frozen. (Its `created` is a `Date`, which freezing cannot fix; the
 * serialiser still writes only a valid instant.)
 */
export function isParsedManifest(manifest: Manifest): boolean {
  return parsedManifests.has(manifest);
}

/**
 * Freezes every plain object and array reachable from `value`, leaving `Date`s as they are. State
 * documents are trees (no cycles, no shared class instances besides dates).
 */
function deepFreeze(value: unknown): void {
  if (typeof value !== "object" || value === null || value instanceof Date) return;
  if (Object.isFrozen(value)) return;
  Object.freeze(value);
  if (Array.isArray(value)) {
    for (const item of value) deepFreeze(item);
    return;
  }
  for (const key in value) deepFreeze((value as Record<string, unknown>)[key]);
}
