import { isFrozenManifest, isSha256Digest, type Manifest } from "@distributor/bundle";
import { pathProblem, STATE_FILE_NAME } from "@distributor/storage";
import { checkedManifestText } from "./embedded-manifest.js";
import { StateError } from "./errors.js";
import { isParsedManifest } from "./known-valid.js";
import { METADATA_FIELDS } from "./parse-common.js";
import { RELEASE_ID_PATTERN, type ReleaseState } from "./release.js";
import { formatOwnerScope, ownerKey } from "./scope.js";
import { runSteps, STEP_RECORDS, type Steps } from "./steps.js";
import { isSerializableTimestamp } from "./time.js";
import {
  type LinkState,
  OUTPUT_KINDS,
  type OutputRecord,
  type OwnerRecord,
  RECONCILIATION_MODES,
  type ReplacementMarker,
  SHARED_ROOT_SCHEMA_VERSION,
  type SharedRootOutputRecord,
  type SharedRootState,
  SINGLE_OWNER_SCHEMA_VERSION,
  type SingleOwnerState,
  type SourceSigner,
  type SourceState,
  type StateDocument,
} from "./types.js";

/**
 * Checks an in-memory single-owner state against the schema 2 rules and throws a `StateError`
 * for the first problem. Parsing runs it too, so a parsed state always passes.
 */
export function validateSingleOwnerState(state: SingleOwnerState): void {
  throwIfProblem(singleOwnerProblem(state));
}

/** The shared-root (schema 3) counterpart of `validateSingleOwnerState`. */
export function validateSharedRootState(state: SharedRootState): void {
  throwIfProblem(sharedRootProblem(state));
}

/**
 * Canonical text of each embedded manifest a validation checked, by manifest: the serialiser
 * validates with one and embeds the texts, so each manifest is rendered and re-read once.
 */
export type ManifestTexts = Map<Manifest, string | typeof FROM_FILES>;

/**
 * In `ManifestTexts`, a manifest that needs no text: frozen as the bundle package parsed it, it is
 * valid and its files are in canonical order, so the serialiser writes it from its files, a few
 * at a time (a million-file manifest is over 100 MB of text).
 */
export const FROM_FILES = Symbol("embedded manifest written from its files");

/** Validates either kind of state document. */
export function validateState(document: StateDocument): void {
  if (document.schemaVersion === SHARED_ROOT_SCHEMA_VERSION) validateSharedRootState(document);
  else validateSingleOwnerState(document);
}

/** The first problem of a single-owner state, or undefined when it is valid. */
export function singleOwnerProblem(state: SingleOwnerState): string | undefined {
  return singleOwnerStateProblem(state, undefined);
}

/** `singleOwnerProblem`, collecting the embedded manifest's checked text in `manifestTexts`. */
export function singleOwnerStateProblem(
  state: SingleOwnerState,
  manifestTexts: ManifestTexts | undefined,
): string | undefined {
  return runSteps(singleOwnerProblemSteps(state, manifestTexts));
}

/** `singleOwnerStateProblem` as steps that pause between phases and every few records. */
export function* singleOwnerProblemSteps(
  state: SingleOwnerState,
  manifestTexts: ManifestTexts | undefined,
): Steps<string | undefined> {
  if (state.schemaVersion !== SINGLE_OWNER_SCHEMA_VERSION) {
    return `state schema_version must be ${SINGLE_OWNER_SCHEMA_VERSION}`;
  }
  const version = distributorVersionProblem(state.distributorVersion);
  if (version !== undefined) return version;
  if (!nonEmpty(state.pipelineId)) return "state pipeline_id is required";
  if (!nonEmpty(state.destinationId)) return "state destination_id is required";
  const timestamps = [
    ["published_at", state.publishedAt],
    ["created_at", state.createdAt],
    ["updated_at", state.updatedAt],
  ] as const;
  for (const [name, value] of timestamps) {
    const problem = timestampProblem(`state ${name}`, value);
    if (problem !== undefined) return problem;
  }
  if (state.state?.mode !== "single_owner") return "state state.mode must be single_owner";
  if (!RECONCILIATION_MODES.includes(state.reconciliation?.mode)) {
    return "state reconciliation.mode must be replace or merge";
  }
  const manifestProblem = sourceManifestProblem(
    "state source.manifest",
    state.source,
    manifestTexts,
  );
  if (manifestProblem !== undefined) return manifestProblem;
  yield;
  const linkProblem =
    linksProblem("state links.primary_url", state.links) ??
    replacingProblem("state replacing", state.replacing) ??
    releaseProblem("state release", state.release);
  if (linkProblem !== undefined) return linkProblem;
  if (!Array.isArray(state.outputs)) return "state outputs is required";
  // Records written in path order (as publications write them) are distinct while each path is
  // greater than the one before: a set of every path is built only for records out of order.
  let seen: Set<string> | undefined;
  let previous = "";
  for (const [index, output] of state.outputs.entries()) {
    const problem = outputProblem(index, output) ?? outputTimestampsProblem(index, output);
    if (problem !== undefined) return problem;
    if (seen === undefined && previous < output.path) {
      previous = output.path;
    } else {
      seen ??= new Set(state.outputs.slice(0, index).map((before) => before.path));
      if (seen.has(output.path)) return duplicatePath(index, output.path);
      seen.add(output.path);
    }
    if (index % STEP_RECORDS === STEP_RECORDS - 1) yield;
  }
  return undefined;
}

/** The first problem of a shared-root state, or undefined when it is valid. */
export function sharedRootProblem(state: SharedRootState): string | undefined {
  return sharedRootStateProblem(state, undefined);
}

/** `sharedRootProblem`, collecting each owner's checked manifest text in `manifestTexts`. */
export function sharedRootStateProblem(
  state: SharedRootState,
  manifestTexts: ManifestTexts | undefined,
): string | undefined {
  if (state.schemaVersion !== SHARED_ROOT_SCHEMA_VERSION) {
    return `state schema_version must be ${SHARED_ROOT_SCHEMA_VERSION}`;
  }
  const version = distributorVersionProblem(state.distributorVersion);
  if (version !== undefined) return version;
  const rootTimestamp =
    timestampProblem("state created_at", state.createdAt) ??
    timestampProblem("state updated_at", state.updatedAt);
  if (rootTimestamp !== undefined) return rootTimestamp;
  if (state.state?.mode !== "shared_root") return "state state.mode must be shared_root";
  if (!Array.isArray(state.owners)) return "state owners is required";
  const owners = new Set<string>();
  for (const [index, owner] of state.owners.entries()) {
    const problem = ownerProblem(index, owner, manifestTexts);
    if (problem !== undefined) return problem;
    const key = ownerKey(owner.scope);
    if (owners.has(key)) {
      return `state owners[${index}] duplicates owner ${formatOwnerScope(owner.scope)}`;
    }
    owners.add(key);
  }
  if (!Array.isArray(state.outputs)) return "state outputs is required";
  const seen = new Set<string>();
  for (const [index, output] of state.outputs.entries()) {
    const problem = outputProblem(index, output) ?? sharedRootOutputProblem(index, output, owners);
    if (problem !== undefined) return problem;
    if (seen.has(output.path)) return duplicatePath(index, output.path);
    seen.add(output.path);
  }
  return undefined;
}

function ownerProblem(
  index: number,
  owner: OwnerRecord,
  manifestTexts: ManifestTexts | undefined,
): string | undefined {
  const at = `state owners[${index}]`;
  if (!nonEmpty(owner.scope?.pipelineId)) return `${at}.pipeline_id is required`;
  if (!nonEmpty(owner.scope?.destinationId)) return `${at}.destination_id is required`;
  if (!RECONCILIATION_MODES.includes(owner.reconciliation?.mode)) {
    return `${at}.reconciliation.mode must be replace or merge`;
  }
  return (
    sourceManifestProblem(`${at}.source.manifest`, owner.source, manifestTexts) ??
    linksProblem(`${at}.links.primary_url`, owner.links) ??
    replacingProblem(`${at}.replacing`, owner.replacing)
  );
}

/** Rules every output record follows, in either schema. */
function outputProblem(index: number, output: OutputRecord): string | undefined {
  const at = `state outputs[${index}]`;
  const path = logicalPathProblem(output.path);
  if (path !== undefined) return `${at}.path: ${path}`;
  // A record naming the state file would let prune or cleanup delete the state itself.
  if (output.path === STATE_FILE_NAME) return `${at}.path must not be ${STATE_FILE_NAME}`;
  if (!OUTPUT_KINDS.includes(output.kind)) return `${at}.kind must be source or generated`;
  const sourcePath = logicalPathProblem(output.sourcePath);
  if (sourcePath !== undefined) return `${at}.source_path: ${sourcePath}`;
  if (output.kind === "generated" && !nonEmpty(output.transform)) {
    return `${at}.transform is required for generated output`;
  }
  if (output.transform !== undefined && typeof output.transform !== "string") {
    return `${at}.transform must be a string`;
  }
  if (output.url !== undefined && output.url !== "") {
    const url = httpUrlProblem(output.url);
    if (url !== undefined) return `${at}.url: ${url}`;
  }
  const digest = digestProblem(output.sha256);
  if (digest !== undefined) return `${at}.sha256: ${digest}`;
  if (!Number.isSafeInteger(output.size)) return `${at}.size must be an integer`;
  if (output.size < 0) return `${at}.size must be non-negative`;
  return storedFormProblem(at, output);
}

/** Rules of the optional `metadata` and `decoded` of an output record. */
function storedFormProblem(at: string, output: OutputRecord): string | undefined {
  const metadata = output.metadata;
  if (metadata !== undefined) {
    if (typeof metadata !== "object" || metadata === null)
      return `${at}.metadata must be an object`;
    for (const [key, field] of METADATA_FIELDS) {
      const value = metadata[field];
      if (value === undefined) continue;
      if (typeof value !== "string" || value === "") {
        return `${at}.metadata.${key} must be a non-empty string`;
      }
      // Stored as an HTTP header value: no line breaks or other control characters.
      // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are the point.
      if (/[\u0000-\u001f\u007f]/.test(value)) {
        return `${at}.metadata.${key} must not contain control characters`;
      }
    }
  }
  const encoded = metadata?.contentEncoding !== undefined;
  if (encoded && output.decoded === undefined) {
    return `${at}.decoded is required when metadata.content_encoding is set`;
  }
  if (!encoded && output.decoded !== undefined) {
    return `${at}.decoded is allowed only when metadata.content_encoding is set`;
  }
  if (output.decoded !== undefined) {
    const digest = digestProblem(output.decoded.sha256);
    if (digest !== undefined) return `${at}.decoded.sha256: ${digest}`;
    const size = output.decoded.size;
    if (!Number.isSafeInteger(size) || size < 0) {
      return `${at}.decoded.size must be a non-negative integer`;
    }
  }
  return undefined;
}

function outputTimestampsProblem(index: number, output: OutputRecord): string | undefined {
  const at = `state outputs[${index}]`;
  return (
    timestampProblem(`${at}.created_at`, output.createdAt) ??
    timestampProblem(`${at}.updated_at`, output.updatedAt)
  );
}

function sharedRootOutputProblem(
  index: number,
  output: SharedRootOutputRecord,
  owners: ReadonlySet<string>,
): string | undefined {
  const at = `state outputs[${index}]`;
  if (!nonEmpty(output.owner?.pipelineId)) return `${at}.pipeline_id is required`;
  if (!nonEmpty(output.owner?.destinationId)) return `${at}.destination_id is required`;
  if (!owners.has(ownerKey(output.owner))) {
    return `${at} references unknown owner ${formatOwnerScope(output.owner)}`;
  }
  if (!nonEmpty(output.sourceId)) return `${at}.source_id is required`;
  const digest = digestProblem(output.sourceDigest);
  if (digest !== undefined) return `${at}.source_digest: ${digest}`;
  return (
    timestampProblem(`${at}.source_created`, output.sourceCreated) ??
    outputTimestampsProblem(index, output)
  );
}

function sourceManifestProblem(
  name: string,
  source: SourceState | undefined,
  manifestTexts: ManifestTexts | undefined,
): string | undefined {
  if (source?.manifest === undefined || source.manifest === null) return `${name} is required`;
  // A manifest parsed with its state is valid as it stands; its text is made only when wanted.
  if (isFrozenManifest(source.manifest)) {
    manifestTexts?.set(source.manifest, FROM_FILES);
  } else if (manifestTexts !== undefined || !isParsedManifest(source.manifest)) {
    const checked = checkedManifestText(source.manifest);
    if (!checked.ok) return `${name}: ${checked.problem}`;
    manifestTexts?.set(source.manifest, checked.text);
  }
  return signerProblem(name.replace(/\.manifest$/, ".signer"), source.signer);
}

/** `ssh-keygen -l`'s SHA-256 fingerprint: 32 bytes, unpadded base64. */
const FINGERPRINT_PATTERN = /^SHA256:[A-Za-z0-9+/]{43}$/;

function signerProblem(name: string, signer: SourceSigner | undefined): string | undefined {
  if (signer === undefined) return undefined;
  if (!nonEmpty(signer.principal)) return `${name}.principal is required`;
  if (typeof signer.fingerprint !== "string" || !FINGERPRINT_PATTERN.test(signer.fingerprint)) {
    return `${name}.fingerprint must be SHA256: and 43 base64 characters, as ssh-keygen -l prints it`;
  }
  return undefined;
}

function linksProblem(name: string, links: LinkState | undefined): string | undefined {
  if (links === undefined || links.primaryUrl === undefined || links.primaryUrl === "") {
    return undefined;
  }
  const problem = httpUrlProblem(links.primaryUrl);
  return problem === undefined ? undefined : `${name}: ${problem}`;
}

function releaseProblem(name: string, release: ReleaseState | undefined): string | undefined {
  if (release === undefined) return undefined;
  if (typeof release.id !== "string" || !RELEASE_ID_PATTERN.test(release.id)) {
    return `${name}.id must be a release id like 20261204T093819.123Z-ab12`;
  }
  return undefined;
}

function replacingProblem(
  name: string,
  replacing: ReplacementMarker | undefined,
): string | undefined {
  if (replacing === undefined) return undefined;
  if (!nonEmpty(replacing.runId)) return `${name}.run_id is required`;
  return timestampProblem(`${name}.started_at`, replacing.startedAt);
}

/** The diagnostic version is optional, but only ever a string (as the parser reads it). */
function distributorVersionProblem(value: unknown): string | undefined {
  return value === undefined || typeof value === "string"
    ? undefined
    : "state distributor_version must be a string";
}

/** Go's zero time meant "missing"; here a missing or invalid `Date` does. */
function timestampProblem(name: string, value: unknown): string | undefined {
  if (value === undefined || value === null) return `${name} is required`;
  if (!isSerializableTimestamp(value)) return `${name} must be a valid date in the years 0000-9999`;
  return undefined;
}

function logicalPathProblem(path: unknown): string | undefined {
  if (typeof path !== "string") return "path must be a string";
  const problem = pathProblem(path);
  return problem === undefined ? undefined : `${problem} (${JSON.stringify(path)})`;
}

/** Why `value` is not a `sha256:` digest, or undefined. */
function digestProblem(value: unknown): string | undefined {
  if (typeof value === "string" && isSha256Digest(value)) return undefined;
  return `digest must be sha256:<64 lowercase hex>, got ${JSON.stringify(value) ?? String(value)}`;
}

/** Why `value` is not an absolute http or https URL, or undefined. */
function httpUrlProblem(value: unknown): string | undefined {
  const shown = JSON.stringify(value) ?? String(value);
  if (typeof value !== "string") return `URL must be a string, got ${shown}`;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return `URL ${shown} must be an absolute http or https URL`;
  }
  if ((url.protocol !== "http:" && url.protocol !== "https:") || url.hostname === "") {
    return `URL ${shown} must be an absolute http or https URL`;
  }
  return undefined;
}

function nonEmpty(value: unknown): value is string {
  return typeof value === "string" && value !== "";
}

function duplicatePath(index: number, path: string): string {
  return `state outputs[${index}].path duplicates ${JSON.stringify(path)}`;
}

/** Throws a `StateError` for `problem`, if there is one. */
export function throwIfProblem(problem: string | undefined): void {
  if (problem !== undefined) throw new StateError(problem);
}
