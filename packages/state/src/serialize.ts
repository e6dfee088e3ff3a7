import { formatTimestamp, type Manifest } from "@distributor/bundle";
import { JsonText } from "./json-text.js";
import { hasMetadata } from "./outputs.js";
import { METADATA_FIELDS } from "./parse-common.js";
import { runSteps, STEP_RECORDS, type Steps } from "./steps.js";
import { formatStateTimestamp } from "./time.js";
import {
  isSharedRootState,
  type LinkState,
  type OutputRecord,
  type ReplacementMarker,
  type SharedRootState,
  type SingleOwnerState,
  type SourceState,
  type StateDocument,
} from "./types.js";
import {
  FROM_FILES,
  type ManifestTexts,
  sharedRootStateProblem,
  singleOwnerProblemSteps,
  throwIfProblem,
} from "./validate.js";

/**
 * Serialises single-owner state as `.distributor.json` text: schema 2, keys in the documented
 * order, compact JSON on one line with a trailing newline (a quarter smaller than indented text),
 * UTC second-precision timestamps, optional fields omitted when empty. Invalid state is refused
 * with a `StateError` rather than written.
 */
export function serializeSingleOwnerState(state: SingleOwnerState): string {
  return runSteps(singleOwnerWriteSteps(state, new JsonText())).text();
}

/** Serialises shared-root state (schema 3) with the same conventions. */
export function serializeSharedRootState(state: SharedRootState): string {
  return writeSharedRootState(state, new JsonText()).text();
}

/** Serialises either kind of document according to its schema. */
export function serializeDocument(document: StateDocument): string {
  return writeDocument(document, new JsonText()).text();
}

/**
 * `serializeDocument`'s text as UTF-8 bytes, encoded as it is written, so that the whole text
 * never exists as one string (for 20 000 outputs, 10 MB less for the collector to find). The
 * result is a view on a larger buffer, like a pooled `Buffer`: use its bytes, not its `.buffer`.
 */
export function encodeDocument(document: StateDocument): Uint8Array {
  return runSteps(encodeDocumentSteps(document));
}

/**
 * `encodeDocument` as steps that pause between phases and every `STEP_RECORDS` records of a
 * single-owner state (see `parseDocumentSteps`).
 */
export function* encodeDocumentSteps(document: StateDocument): Steps<Uint8Array> {
  return (yield* writeDocumentSteps(document, new JsonText({ encode: true }))).bytes();
}

function writeDocument(document: StateDocument, json: JsonText): JsonText {
  return runSteps(writeDocumentSteps(document, json));
}

function* writeDocumentSteps(document: StateDocument, json: JsonText): Steps<JsonText> {
  return isSharedRootState(document)
    ? writeSharedRootState(document, json)
    : yield* singleOwnerWriteSteps(document, json);
}

function* singleOwnerWriteSteps(state: SingleOwnerState, json: JsonText): Steps<JsonText> {
  const manifests: ManifestTexts = new Map();
  throwIfProblem(yield* singleOwnerProblemSteps(state, manifests));
  yield;
  const timestamp = timestampFormatter();
  openDocument(json, state)
    .member("pipeline_id", state.pipelineId)
    .member("destination_id", state.destinationId)
    .member("published_at", timestamp(state.publishedAt))
    .member("created_at", timestamp(state.createdAt))
    .member("updated_at", timestamp(state.updatedAt))
    .openObject("state")
    .member("mode", state.state.mode)
    .end()
    .openObject("reconciliation")
    .member("mode", state.reconciliation.mode)
    .end();
  yield* writeSourceSteps(json, manifests, state.source);
  writeLinks(json, state.links);
  writeReplacing(json, state.replacing, timestamp);
  if (state.release !== undefined) json.openObject("release").member("id", state.release.id).end();
  json.openArray("outputs");
  for (const [index, output] of state.outputs.entries()) {
    writeOutputFields(json.openObject(), output)
      .member("created_at", timestamp(output.createdAt))
      .member("updated_at", timestamp(output.updatedAt))
      .end();
    if (index % STEP_RECORDS === STEP_RECORDS - 1) yield;
  }
  return json.end().end();
}

function writeSharedRootState(state: SharedRootState, json: JsonText): JsonText {
  const manifests: ManifestTexts = new Map();
  throwIfProblem(sharedRootStateProblem(state, manifests));
  const timestamp = timestampFormatter();
  openDocument(json, state)
    .member("created_at", timestamp(state.createdAt))
    .member("updated_at", timestamp(state.updatedAt))
    .openObject("state")
    .member("mode", state.state.mode)
    .end()
    .openArray("owners");
  for (const owner of state.owners) {
    json
      .openObject()
      .member("pipeline_id", owner.scope.pipelineId)
      .member("destination_id", owner.scope.destinationId)
      .openObject("reconciliation")
      .member("mode", owner.reconciliation.mode)
      .end();
    runSteps(writeSourceSteps(json, manifests, owner.source));
    writeLinks(json, owner.links);
    writeReplacing(json, owner.replacing, timestamp);
    json.end();
  }
  json.end().openArray("outputs");
  for (const output of state.outputs) {
    writeOutputFields(json.openObject(), output)
      .member("pipeline_id", output.owner.pipelineId)
      .member("destination_id", output.owner.destinationId)
      .member("source_id", output.sourceId)
      .member("source_digest", output.sourceDigest)
      .member("source_created", timestamp(output.sourceCreated))
      .member("created_at", timestamp(output.createdAt))
      .member("updated_at", timestamp(output.updatedAt))
      .end();
  }
  return json.end().end();
}

/** Opens the root object with the members both schemas open with: the version fields. */
function openDocument(json: JsonText, state: StateDocument): JsonText {
  json.openObject().member("schema_version", state.schemaVersion);
  if (state.distributorVersion) json.member("distributor_version", state.distributorVersion);
  return json;
}

/** `source.manifest`: the manifest's canonical text, the one validation read back; its signer. */
function* writeSourceSteps(
  json: JsonText,
  manifests: ManifestTexts,
  source: SourceState,
): Steps<void> {
  const text = manifests.get(source.manifest);
  // Validation records every manifest it accepts; a missing text would be a bug here.
  if (text === undefined) throw new Error("state serialiser: embedded manifest was not validated");
  json.openObject("source");
  if (text === FROM_FILES) yield* writeManifestSteps(json, source.manifest);
  else json.rendered("manifest", text);
  if (source.signer !== undefined) {
    json
      .openObject("signer")
      .member("principal", source.signer.principal)
      .member("fingerprint", source.signer.fingerprint)
      .end();
  }
  json.end();
}

/**
 * A manifest frozen as parsed, written as the compact form of its canonical text (the same
 * members in the same order; its files are already in canonical order), a few files per step.
 */
function* writeManifestSteps(json: JsonText, manifest: Manifest): Steps<void> {
  json
    .openObject("manifest")
    .member("schema_version", manifest.schemaVersion)
    .member("id", manifest.id)
    .member("created", formatTimestamp(manifest.created))
    .member("digest", manifest.digest)
    .openArray("files");
  for (const [index, file] of manifest.files.entries()) {
    json
      .openObject()
      .member("path", file.path)
      .member("sha256", file.sha256)
      .member("size", file.size)
      .end();
    if (index % STEP_RECORDS === STEP_RECORDS - 1) yield;
  }
  json.end().end();
}

function writeReplacing(
  json: JsonText,
  replacing: ReplacementMarker | undefined,
  timestamp: (date: Date) => string,
): void {
  if (replacing === undefined) return;
  json
    .openObject("replacing")
    .member("run_id", replacing.runId)
    .member("started_at", timestamp(replacing.startedAt))
    .end();
}

function writeLinks(json: JsonText, links: LinkState | undefined): void {
  if (links?.primaryUrl) json.openObject("links").member("primary_url", links.primaryUrl).end();
}

/** The fields both schemas share, up to `size`; timestamps follow per schema. */
function writeOutputFields(json: JsonText, output: OutputRecord): JsonText {
  json.member("path", output.path).member("kind", output.kind);
  json.member("source_path", output.sourcePath);
  if (output.transform) json.member("transform", output.transform);
  if (output.url) json.member("url", output.url);
  json.member("sha256", output.sha256).member("size", output.size);
  const metadata = output.metadata;
  if (metadata !== undefined && hasMetadata(metadata)) {
    json.openObject("metadata");
    for (const [key, field] of METADATA_FIELDS) {
      const value = metadata[field];
      if (value !== undefined) json.member(key, value);
    }
    json.end();
  }
  if (output.decoded !== undefined) {
    json
      .openObject("decoded")
      .member("sha256", output.decoded.sha256)
      .member("size", output.decoded.size)
      .end();
  }
  return json;
}

/**
 * `formatStateTimestamp` remembering the instants it formatted: the outputs of one publication
 * share a handful of timestamps, and formatting each anew allocated two strings per field.
 */
function timestampFormatter(): (date: Date) => string {
  const formatted = new Map<number, string>();
  return (date) => {
    const time = date.getTime();
    let text = formatted.get(time);
    if (text === undefined) {
      text = formatStateTimestamp(date);
      formatted.set(time, text);
    }
    return text;
  };
}
