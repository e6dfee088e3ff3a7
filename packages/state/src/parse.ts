import { StateError } from "./errors.js";
import {
  decodeStateJson,
  type JsonObject,
  optionalString,
  requiredInteger,
  requiredMode,
  requiredString,
  requiredTimestamp,
} from "./json.js";
import { legacyDefaults } from "./legacy.js";
import {
  readLinks,
  readOutputFields,
  readRequiredArray,
  readSourceManifest,
} from "./parse-common.js";
import { readSharedRootState } from "./parse-shared-root.js";
import {
  LEGACY_SCHEMA_VERSION,
  type OutputRecord,
  type ReconciliationMode,
  SHARED_ROOT_SCHEMA_VERSION,
  SINGLE_OWNER_SCHEMA_VERSION,
  type SingleOwnerState,
  type StateDocument,
} from "./types.js";
import { validateSingleOwnerState } from "./validate.js";

/**
 * Parses `.distributor.json` text of any supported schema, dispatching on `schema_version`:
 * 1 and 2 give single-owner state (1 normalised to 2), 3 gives shared-root state. Throws a
 * `StateError` naming the first problem. Unknown fields are ignored, as in the reference.
 */
export function parseDocument(text: string): StateDocument {
  const root = decodeStateJson(text);
  const version = requiredInteger(root, "schema_version", "state schema_version");
  if (version === SHARED_ROOT_SCHEMA_VERSION) return readSharedRootState(root);
  if (version === SINGLE_OWNER_SCHEMA_VERSION || version === LEGACY_SCHEMA_VERSION) {
    return readSingleOwnerState(root);
  }
  throw new StateError(
    `state schema_version must be ${LEGACY_SCHEMA_VERSION}, ${SINGLE_OWNER_SCHEMA_VERSION} or ${SHARED_ROOT_SCHEMA_VERSION}`,
  );
}

/** Parses single-owner state: schema 2, or legacy schema 1 normalised to schema 2. */
export function parseSingleOwnerState(text: string): SingleOwnerState {
  return readSingleOwnerState(decodeStateJson(text));
}

function readSingleOwnerState(root: JsonObject): SingleOwnerState {
  const version = requiredInteger(root, "schema_version", "state schema_version");
  if (version !== SINGLE_OWNER_SCHEMA_VERSION && version !== LEGACY_SCHEMA_VERSION) {
    throw new StateError(
      `state schema_version must be ${LEGACY_SCHEMA_VERSION} or ${SINGLE_OWNER_SCHEMA_VERSION}`,
    );
  }
  const legacy = version === LEGACY_SCHEMA_VERSION;
  const distributorVersion = optionalString(
    root,
    "distributor_version",
    "state distributor_version",
  );
  const pipelineId = requiredString(root, "pipeline_id", "state pipeline_id");
  const destinationId = requiredString(root, "destination_id", "state destination_id");
  const publishedAt = requiredTimestamp(root, "published_at", "state published_at");

  let createdAt: Date;
  let updatedAt: Date;
  let reconciliationMode: string;
  // The literal type is checked by validation below (`state.mode must be single_owner`).
  let stateMode: string;
  if (legacy) {
    const defaults = legacyDefaults(publishedAt);
    createdAt = defaults.createdAt;
    updatedAt = defaults.updatedAt;
    stateMode = defaults.state.mode;
    reconciliationMode = defaults.reconciliation.mode;
  } else {
    createdAt = requiredTimestamp(root, "created_at", "state created_at");
    updatedAt = requiredTimestamp(root, "updated_at", "state updated_at");
    stateMode = requiredMode(root, "state", "state state");
    reconciliationMode = requiredMode(root, "reconciliation", "state reconciliation");
  }

  const manifest = readSourceManifest(root, "state source");
  const links = readLinks(root, "state links");
  const outputs = readRequiredArray(root, "outputs", "state outputs").map((value, index) =>
    readOutput(value, index, legacy ? publishedAt : undefined),
  );

  const state: SingleOwnerState = {
    schemaVersion: SINGLE_OWNER_SCHEMA_VERSION,
    pipelineId,
    destinationId,
    publishedAt,
    createdAt,
    updatedAt,
    state: { mode: stateMode as "single_owner" },
    reconciliation: { mode: reconciliationMode as ReconciliationMode },
    source: { manifest },
    outputs,
  };
  if (distributorVersion !== undefined) state.distributorVersion = distributorVersion;
  if (links !== undefined) state.links = links;
  validateSingleOwnerState(state);
  return state;
}

/** `legacyTime` is set for schema 1, whose output records carry no timestamps. */
function readOutput(value: unknown, index: number, legacyTime: Date | undefined): OutputRecord {
  const { object, fields } = readOutputFields(value, index);
  const at = `state outputs[${index}]`;
  const createdAt =
    legacyTime === undefined
      ? requiredTimestamp(object, "created_at", `${at}.created_at`)
      : new Date(legacyTime);
  const updatedAt =
    legacyTime === undefined
      ? requiredTimestamp(object, "updated_at", `${at}.updated_at`)
      : new Date(legacyTime);
  return { ...fields, createdAt, updatedAt };
}
