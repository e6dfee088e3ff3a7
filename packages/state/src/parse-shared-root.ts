import { StateError } from "./errors.js";
import {
  arrayObject,
  decodeStateJson,
  type JsonObject,
  optionalString,
  requiredInteger,
  requiredMode,
  requiredString,
  requiredTimestamp,
} from "./json.js";
import {
  readLinks,
  readOutputFields,
  readRequiredArray,
  readSourceManifest,
} from "./parse-common.js";
import {
  type OwnerRecord,
  type ReconciliationMode,
  SHARED_ROOT_SCHEMA_VERSION,
  type SharedRootOutputRecord,
  type SharedRootState,
} from "./types.js";
import { validateSharedRootState } from "./validate.js";

/** Parses shared-root state (schema 3 only). */
export function parseSharedRootState(text: string): SharedRootState {
  return readSharedRootState(decodeStateJson(text));
}

export function readSharedRootState(root: JsonObject): SharedRootState {
  const version = requiredInteger(root, "schema_version", "state schema_version");
  if (version !== SHARED_ROOT_SCHEMA_VERSION) {
    throw new StateError(`state schema_version must be ${SHARED_ROOT_SCHEMA_VERSION}`);
  }
  const distributorVersion = optionalString(
    root,
    "distributor_version",
    "state distributor_version",
  );
  const createdAt = requiredTimestamp(root, "created_at", "state created_at");
  const updatedAt = requiredTimestamp(root, "updated_at", "state updated_at");
  // The literal type is checked by validation below (`state.mode must be shared_root`).
  const stateMode = requiredMode(root, "state", "state state");
  const owners = readRequiredArray(root, "owners", "state owners").map(readOwner);
  const outputs = readRequiredArray(root, "outputs", "state outputs").map(readOutput);

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
  return state;
}

function readOwner(value: unknown, index: number): OwnerRecord {
  const at = `state owners[${index}]`;
  const object = arrayObject(value, at);
  const pipelineId = requiredString(object, "pipeline_id", `${at}.pipeline_id`);
  const destinationId = requiredString(object, "destination_id", `${at}.destination_id`);
  const mode = requiredMode(object, "reconciliation", `${at}.reconciliation`);
  const manifest = readSourceManifest(object, `${at}.source`);
  const links = readLinks(object, `${at}.links`);
  const owner: OwnerRecord = {
    scope: { pipelineId, destinationId },
    reconciliation: { mode: mode as ReconciliationMode },
    source: { manifest },
  };
  if (links !== undefined) owner.links = links;
  return owner;
}

function readOutput(value: unknown, index: number): SharedRootOutputRecord {
  const { object, fields } = readOutputFields(value, index);
  const at = `state outputs[${index}]`;
  const pipelineId = requiredString(object, "pipeline_id", `${at}.pipeline_id`);
  const destinationId = requiredString(object, "destination_id", `${at}.destination_id`);
  const sourceId = requiredString(object, "source_id", `${at}.source_id`);
  const sourceDigest = requiredString(object, "source_digest", `${at}.source_digest`);
  const sourceCreated = requiredTimestamp(object, "source_created", `${at}.source_created`);
  const createdAt = requiredTimestamp(object, "created_at", `${at}.created_at`);
  const updatedAt = requiredTimestamp(object, "updated_at", `${at}.updated_at`);
  return {
    ...fields,
    owner: { pipelineId, destinationId },
    sourceId,
    sourceDigest,
    sourceCreated,
    createdAt,
    updatedAt,
  };
}
