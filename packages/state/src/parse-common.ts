import type { Manifest } from "@distributor/bundle";
import { parseEmbeddedManifestSteps } from "./embedded-manifest.js";
import { StateError } from "./errors.js";
import {
  arrayObject,
  field,
  type JsonObject,
  optionalObject,
  optionalString,
  requiredInteger,
  requiredString,
  requiredTimestamp,
  type TimestampCache,
} from "./json.js";
import type { ReleaseState } from "./release.js";
import { runSteps, type Steps } from "./steps.js";
import type {
  LinkState,
  OutputKind,
  OutputMetadata,
  OutputProjection,
  ReplacementMarker,
  SourceState,
} from "./types.js";

/** `schema_version`, refused unless it is one of `accepted`, which the message lists. */
export function readSchemaVersion(root: JsonObject, accepted: readonly number[]): number {
  const version = requiredInteger(root, "schema_version", "state schema_version");
  if (accepted.includes(version)) return version;
  const listed =
    accepted.length === 1
      ? String(accepted[0])
      : `${accepted.slice(0, -1).join(", ")} or ${accepted.at(-1)}`;
  throw new StateError(`state schema_version must be ${listed}`);
}

/** The optional, diagnostic `distributor_version`. */
export function readDistributorVersion(root: JsonObject): string | undefined {
  return optionalString(root, "distributor_version", "state distributor_version");
}

/** `created_at` and `updated_at` of an output record; `at` is e.g. `state outputs[0]`. */
export function readRecordTimestamps(
  object: JsonObject,
  at: string,
  cache?: TimestampCache,
): { createdAt: Date; updatedAt: Date } {
  return {
    createdAt: requiredTimestamp(object, "created_at", `${at}.created_at`, cache),
    updatedAt: requiredTimestamp(object, "updated_at", `${at}.updated_at`, cache),
  };
}

/** Fields every output record carries in either schema, read in the reference's order. */
export function readOutputFields(
  value: unknown,
  index: number,
): { object: JsonObject; fields: OutputProjection } {
  const at = `state outputs[${index}]`;
  const object = arrayObject(value, at);
  const path = requiredString(object, "path", `${at}.path`);
  // Unsupported kinds are reported by validation: `kind must be source or generated`.
  const kind = requiredString(object, "kind", `${at}.kind`) as OutputKind;
  const sourcePath = requiredString(object, "source_path", `${at}.source_path`);
  const transform = optionalString(object, "transform", `${at}.transform`);
  const url = optionalString(object, "url", `${at}.url`);
  const sha256 = requiredString(object, "sha256", `${at}.sha256`);
  const size = requiredInteger(object, "size", `${at}.size`);
  const fields: OutputProjection = { path, kind, sourcePath, sha256, size };
  if (transform !== undefined) fields.transform = transform;
  if (url !== undefined) fields.url = url;
  const metadata = readOutputMetadata(object, `${at}.metadata`);
  if (metadata !== undefined) fields.metadata = metadata;
  const decoded = optionalObject(object, "decoded", `${at}.decoded`);
  if (decoded !== undefined) {
    fields.decoded = {
      sha256: requiredString(decoded, "sha256", `${at}.decoded.sha256`),
      size: requiredInteger(decoded, "size", `${at}.decoded.size`),
    };
  }
  return { object, fields };
}

/** `metadata` of an output record; absent or empty reads as none. */
function readOutputMetadata(object: JsonObject, name: string): OutputMetadata | undefined {
  const found = optionalObject(object, "metadata", name);
  if (found === undefined) return undefined;
  const metadata: OutputMetadata = {};
  for (const [key, field] of METADATA_FIELDS) {
    const value = optionalString(found, key, `${name}.${key}`);
    if (value !== undefined) metadata[field] = value;
  }
  return Object.keys(metadata).length === 0 ? undefined : metadata;
}

/** JSON key and field of each metadata entry, in the order documents list them. */
export const METADATA_FIELDS: readonly (readonly [string, keyof OutputMetadata])[] = [
  ["cache_control", "cacheControl"],
  ["content_type", "contentType"],
  ["content_disposition", "contentDisposition"],
  ["content_encoding", "contentEncoding"],
];

/** `source` of a document or owner; `name` is e.g. `state owners[0].source`. */
export function readSource(object: JsonObject, name: string): SourceState {
  return runSteps(readSourceSteps(object, name));
}

/**
 * `readSource` as steps: the embedded manifest is checked in steps. Its strings equal to
 * `shared`'s (the source manifest a run holds) are taken from that (`frozenManifestFromJsonSteps`).
 */
export function* readSourceSteps(
  object: JsonObject,
  name: string,
  shared?: Manifest,
): Steps<SourceState> {
  const source = optionalObject(object, "source", name);
  const manifest = source === undefined ? undefined : field(source, "manifest");
  if (source === undefined || manifest === undefined) {
    throw new StateError(`${name}.manifest is required`);
  }
  const read: SourceState = {
    manifest: yield* parseEmbeddedManifestSteps(manifest, `${name}.manifest`, shared),
  };
  const signer = optionalObject(source, "signer", `${name}.signer`);
  if (signer !== undefined) {
    read.signer = {
      principal: requiredString(signer, "principal", `${name}.signer.principal`),
      fingerprint: requiredString(signer, "fingerprint", `${name}.signer.fingerprint`),
    };
  }
  return read;
}

/** `links`; an absent or empty `primary_url` reads as no links at all. */
export function readLinks(object: JsonObject, name: string): LinkState | undefined {
  const links = optionalObject(object, "links", name);
  if (links === undefined) return undefined;
  const primaryUrl = optionalString(links, "primary_url", `${name}.primary_url`);
  return primaryUrl === undefined ? undefined : { primaryUrl };
}

/** The optional `replacing` object: `run_id` and `started_at`, both required inside it. */
export function readReplacing(object: JsonObject, name: string): ReplacementMarker | undefined {
  const replacing = optionalObject(object, "replacing", name);
  if (replacing === undefined) return undefined;
  return {
    runId: requiredString(replacing, "run_id", `${name}.run_id`),
    startedAt: requiredTimestamp(replacing, "started_at", `${name}.started_at`),
  };
}

export function readRelease(object: JsonObject, name: string): ReleaseState | undefined {
  const release = optionalObject(object, "release", name);
  if (release === undefined) return undefined;
  return { id: requiredString(release, "id", `${name}.id`) };
}

/** A required array field: `<name> is required` when absent or null. */
export function readRequiredArray(object: JsonObject, key: string, name: string): unknown[] {
  const value = field(object, key);
  if (value === undefined) throw new StateError(`${name} is required`);
  if (!Array.isArray(value)) throw new StateError(`${name} must be an array`);
  return value;
}
