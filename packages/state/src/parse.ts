import {
  type ElementHook,
  isFrozenManifest,
  type Manifest,
  type ManifestFile,
  type PiecedJson,
  sharedManifestFile,
} from "@distributor/bundle";
import {
  arrayObject,
  decodeStateJson,
  decodeStateJsonSteps,
  type JsonObject,
  requiredMode,
  requiredString,
  requiredTimestamp,
  TimestampCache,
} from "./json.js";
import { frozenRecord, knownValid } from "./known-valid.js";
import { legacyDefaults, type SchemaTwoFields } from "./legacy.js";
import { requiredRecordFields } from "./outputs.js";
import {
  readDistributorVersion,
  readLinks,
  readOutputFields,
  readRecordTimestamps,
  readRelease,
  readReplacing,
  readRequiredArray,
  readSchemaVersion,
  readSource,
  readSourceSteps,
} from "./parse-common.js";
import { runSteps, STEP_RECORDS, type Steps } from "./steps.js";
import {
  LEGACY_SCHEMA_VERSION,
  type OutputProjection,
  type OutputRecord,
  type OwnerRecord,
  type ReconciliationMode,
  SHARED_ROOT_SCHEMA_VERSION,
  type SharedRootOutputRecord,
  type SharedRootState,
  SINGLE_OWNER_SCHEMA_VERSION,
  type SingleOwnerState,
  type StateDocument,
} from "./types.js";
import { singleOwnerProblemSteps, throwIfProblem, validateSharedRootState } from "./validate.js";

const SINGLE_OWNER_VERSIONS = [LEGACY_SCHEMA_VERSION, SINGLE_OWNER_SCHEMA_VERSION];

/**
 * Parses `.distributor.json` text of any supported schema, dispatching on `schema_version`:
 * 1 and 2 give single-owner state (1 normalised to 2), 3 gives shared-root state. Throws a
 * `StateError` naming the first problem. Unknown fields are ignored, as in the reference.
 */
export function parseDocument(text: string): StateDocument {
  return runSteps(parseDocumentSteps(text));
}

/**
 * `parseDocument` as steps that pause between phases and every `STEP_RECORDS` records of a
 * single-owner state (a shared-root state is read in one piece): a caller holding a lease runs
 * them in slices, letting its event loop turn between them. Text given in pieces is read a window
 * at a time (`parseJsonPiecesSteps`).
 */
export function* parseDocumentSteps(
  text: string | PiecedJson,
  options: ParseOptions = {},
): Steps<StateDocument> {
  const root = yield* decodeStateJsonSteps(text, sharingHook(options.sharedManifest));
  yield;
  const version = readSchemaVersion(root, [...SINGLE_OWNER_VERSIONS, SHARED_ROOT_SCHEMA_VERSION]);
  return version === SHARED_ROOT_SCHEMA_VERSION
    ? readSharedRootState(root)
    : yield* singleOwnerSteps(root, options.sharedManifest);
}

export interface ParseOptions {
  /**
   * A manifest the caller holds, likely the one the state embeds (the run's source manifest): the
   * embedded manifest takes equal paths and digests from it instead of holding copies. Only memory
   * changes; the document read is the same.
   */
  sharedManifest?: Manifest | undefined;
}

/**
 * Shares what a state's long arrays repeat as they are decoded, before anything reads them: an
 * embedded manifest entry equal to the held manifest's entry at its index becomes that entry, and
 * an output record takes its path, source path and digest from that entry and its instants from
 * the records before it. Every decoded record is smaller from the start, and the copies die young
 * instead of living on until the whole document is decoded. Only memory changes.
 */
function sharingHook(shared: Manifest | undefined): ElementHook {
  const frozen = shared !== undefined && isFrozenManifest(shared);
  const times = new Map<string, string>();
  const time = (text: unknown) => {
    if (typeof text !== "string") return text;
    const known = times.get(text);
    if (known !== undefined) return known;
    // Bounded: a state whose records all differ keeps no more than a few.
    if (times.size >= 64) times.clear();
    times.set(text, text);
    return text;
  };
  return (keys, index, value) => {
    const file = shared?.files[index];
    if (keys.length === 1 && keys[0] === "outputs") {
      if (typeof value !== "object" || value === null || Array.isArray(value)) return value;
      const record = value as Record<string, unknown>;
      if (file !== undefined) {
        if (record.path === file.path) record.path = file.path;
        if (record.source_path === file.path) record.source_path = file.path;
        if (record.sha256 === file.sha256) record.sha256 = file.sha256;
      }
      if (Object.hasOwn(record, "created_at")) record.created_at = time(record.created_at);
      if (Object.hasOwn(record, "updated_at")) record.updated_at = time(record.updated_at);
      return record;
    }
    // Entries are shared only with a frozen manifest: the state's copy is frozen too, and a
    // caller's own manifest must stay as it is.
    if (
      frozen &&
      keys.length === 3 &&
      keys[0] === "source" &&
      keys[1] === "manifest" &&
      keys[2] === "files"
    ) {
      return sharedManifestFile(value, file);
    }
    return value;
  };
}

/** Parses single-owner state: schema 2, or legacy schema 1 normalised to schema 2. */
export function parseSingleOwnerState(text: string): SingleOwnerState {
  return runSteps(singleOwnerSteps(decodeStateJson(text)));
}

/** Parses shared-root state (schema 3 only). */
export function parseSharedRootState(text: string): SharedRootState {
  return readSharedRootState(decodeStateJson(text));
}

function* singleOwnerSteps(root: JsonObject, sharedManifest?: Manifest): Steps<SingleOwnerState> {
  const legacy = readSchemaVersion(root, SINGLE_OWNER_VERSIONS) === LEGACY_SCHEMA_VERSION;
  const distributorVersion = readDistributorVersion(root);
  const pipelineId = requiredString(root, "pipeline_id", "state pipeline_id");
  const destinationId = requiredString(root, "destination_id", "state destination_id");
  const publishedAt = requiredTimestamp(root, "published_at", "state published_at");
  const schemaTwo = legacy ? legacyDefaults(publishedAt) : readSchemaTwoFields(root);
  const source = yield* readSourceSteps(root, "state source", sharedManifest);
  // The decoded tree is this parse's own: what is read is let go as it is read, so a big state is
  // not held twice (decoded and read) at its end.
  delete root.source;
  yield;
  const links = readLinks(root, "state links");
  const replacing = readReplacing(root, "state replacing");
  const release = readRelease(root, "state release");
  const records = readRequiredArray(root, "outputs", "state outputs");
  const outputs: OutputRecord[] = [];
  const shared: SharedValues = { files: source.manifest.files, times: new TimestampCache() };
  for (let index = 0; index < records.length; index++) {
    const record = readOutput(records[index], index, legacy ? publishedAt : undefined, shared);
    records[index] = undefined;
    outputs.push(frozenRecord(record));
    if (index % STEP_RECORDS === STEP_RECORDS - 1) yield;
  }

  const state: SingleOwnerState = {
    schemaVersion: SINGLE_OWNER_SCHEMA_VERSION,
    pipelineId,
    destinationId,
    publishedAt,
    ...schemaTwo,
    source,
    outputs,
  };
  if (distributorVersion !== undefined) state.distributorVersion = distributorVersion;
  if (links !== undefined) state.links = links;
  if (replacing !== undefined) state.replacing = replacing;
  if (release !== undefined) state.release = release;
  throwIfProblem(yield* singleOwnerProblemSteps(state, undefined));
  return knownValid(state);
}

function readSchemaTwoFields(root: JsonObject): SchemaTwoFields {
  const createdAt = requiredTimestamp(root, "created_at", "state created_at");
  const updatedAt = requiredTimestamp(root, "updated_at", "state updated_at");
  // Unsupported modes are reported by validation: `state.mode must be single_owner`.
  const stateMode = requiredMode(root, "state", "state state");
  const reconciliationMode = requiredMode(root, "reconciliation", "state reconciliation");
  return {
    createdAt,
    updatedAt,
    state: { mode: stateMode as "single_owner" },
    reconciliation: { mode: reconciliationMode as ReconciliationMode },
  };
}

/** What records of one state share: the embedded manifest's files, the instants read so far. */
interface SharedValues {
  files: readonly ManifestFile[];
  times: TimestampCache;
}

/** `legacyTime` is set for schema 1, whose output records carry no timestamps. */
function readOutput(
  value: unknown,
  index: number,
  legacyTime: Date | undefined,
  shared: SharedValues,
): OutputRecord {
  const { object, fields } = readOutputFields(value, index);
  shareManifestStrings(fields, shared.files[index]);
  const timestamps =
    legacyTime === undefined
      ? readRecordTimestamps(object, `state outputs[${index}]`, shared.times)
      : { createdAt: new Date(legacyTime), updatedAt: new Date(legacyTime) };
  // Optional fields as read: `readOutputFields` leaves out empty ones and builds its own objects,
  // so they are not copied again as `outputRecord` would.
  const record = requiredRecordFields(fields, timestamps.createdAt, timestamps.updatedAt);
  if (fields.transform !== undefined) record.transform = fields.transform;
  if (fields.url !== undefined) record.url = fields.url;
  if (fields.metadata !== undefined) record.metadata = fields.metadata;
  if (fields.decoded !== undefined) record.decoded = fields.decoded;
  return record;
}

/**
 * A record usually repeats the manifest entry at its own index (its path, source path and digest):
 * equal strings are taken from the entry, so the record holds no copies of its own.
 */
function shareManifestStrings(fields: OutputProjection, file: ManifestFile | undefined): void {
  if (file === undefined) return;
  if (fields.sourcePath === file.path) fields.sourcePath = file.path;
  if (fields.path === file.path) fields.path = file.path;
  if (fields.sha256 === file.sha256) fields.sha256 = file.sha256;
}

function readSharedRootState(root: JsonObject): SharedRootState {
  readSchemaVersion(root, [SHARED_ROOT_SCHEMA_VERSION]);
  const distributorVersion = readDistributorVersion(root);
  const createdAt = requiredTimestamp(root, "created_at", "state created_at");
  const updatedAt = requiredTimestamp(root, "updated_at", "state updated_at");
  // The literal type is checked by validation below (`state.mode must be shared_root`).
  const stateMode = requiredMode(root, "state", "state state");
  const owners = readRequiredArray(root, "owners", "state owners").map(readOwner);
  const outputs = readRequiredArray(root, "outputs", "state outputs").map((value, index) =>
    frozenRecord(readSharedRootOutput(value, index)),
  );

  const state: SharedRootState = {
    schemaVersion: SHARED_ROOT_SCHEMA_VERSION,
    createdAt,
    updatedAt,
    state: { mode: stateMode as "shared_root" },
    owners,
    outputs,
  };
  if (distributorVersion !== undefined) state.distributorVersion = distributorVersion;
  validateSharedRootState(state);
  return knownValid(state);
}

function readOwner(value: unknown, index: number): OwnerRecord {
  const at = `state owners[${index}]`;
  const object = arrayObject(value, at);
  const pipelineId = requiredString(object, "pipeline_id", `${at}.pipeline_id`);
  const destinationId = requiredString(object, "destination_id", `${at}.destination_id`);
  const mode = requiredMode(object, "reconciliation", `${at}.reconciliation`);
  const source = readSource(object, `${at}.source`);
  const links = readLinks(object, `${at}.links`);
  const replacing = readReplacing(object, `${at}.replacing`);
  const owner: OwnerRecord = {
    scope: { pipelineId, destinationId },
    reconciliation: { mode: mode as ReconciliationMode },
    source,
  };
  if (links !== undefined) owner.links = links;
  if (replacing !== undefined) owner.replacing = replacing;
  return owner;
}

function readSharedRootOutput(value: unknown, index: number): SharedRootOutputRecord {
  const { object, fields } = readOutputFields(value, index);
  const at = `state outputs[${index}]`;
  const pipelineId = requiredString(object, "pipeline_id", `${at}.pipeline_id`);
  const destinationId = requiredString(object, "destination_id", `${at}.destination_id`);
  const sourceId = requiredString(object, "source_id", `${at}.source_id`);
  const sourceDigest = requiredString(object, "source_digest", `${at}.source_digest`);
  const sourceCreated = requiredTimestamp(object, "source_created", `${at}.source_created`);
  const { createdAt, updatedAt } = readRecordTimestamps(object, at);
  // Assigned onto the fresh fields rather than spread (see `readOutput`).
  const record = fields as SharedRootOutputRecord;
  record.owner = { pipelineId, destinationId };
  record.sourceId = sourceId;
  record.sourceDigest = sourceDigest;
  record.sourceCreated = sourceCreated;
  record.createdAt = createdAt;
  record.updatedAt = updatedAt;
  return record;
}
