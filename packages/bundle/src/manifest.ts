import { createHash } from "node:crypto";
import {
  compareLogicalPaths,
  pathProblem,
  reservedSegment,
  runSteps,
  type Steps,
} from "@distributor/storage";
import { decoded, fromDecodedJson } from "./decoded-json.js";
import { digestLinesInOrder, isSha256Digest } from "./digest.js";
import { ManifestError } from "./errors.js";
import { parseJsonSteps, parseStrictJsonSteps } from "./json-slices.js";
import { isSortedSteps, STEP_FILES } from "./manifest-order.js";
import { isManifestTextSteps, serializeManifest } from "./manifest-text.js";
import type { Manifest, ManifestFile } from "./manifest-types.js";
import { JsonNumber, type JsonObject, JsonSyntaxError, type JsonValue } from "./strict-json.js";
import { isRepresentableDate, parseTimestamp } from "./timestamp.js";

/** Name of the manifest file at the root of every bundle. */
export const MANIFEST_FILE_NAME = "manifest.json";
/**
 * The detached SSH signature of the manifest, beside it at the bundle root: part of the bundle
 * as the manifest is, never listed in it nor published.
 */
export const SIGNATURE_FILE_NAME = "manifest.json.sig";
/** The only manifest schema version. */
export const MANIFEST_SCHEMA_VERSION = 1;
/** Bundle ids: a letter or digit, then up to 127 letters, digits, `.`, `_` or `-`. */
export const BUNDLE_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

const MANIFEST_FIELDS = ["schema_version", "id", "created", "digest", "files"] as const;
const FILE_FIELDS = ["path", "sha256", "size"] as const;
const DIGEST_FORMAT = "sha256:<64 lowercase hex>";
// In unicode mode a surrogate class matches only unpaired surrogates, which UTF-8 cannot encode.
const LONE_SURROGATE = /[\ud800-\udfff]/u;

/**
 * Parses and validates `manifest.json` text (docs/design/bundles.md). Every failure is a `ManifestError` naming
 * the field; `source` (e.g. `reports/manifest.json`) prefixes the message. Files come back sorted
 * by path in byte order.
 */
export function parseManifest(text: string, source?: string): Manifest {
  return remember(readManifestText(text, source));
}

/**
 * `parseManifest`, returning the manifest frozen (its file list and every file too): one that
 * stays exactly as parsed, so it is known valid without the canonical text's digest that
 * `parseManifest` computes to notice later changes (about 0.2 s at 10⁵ files). For manifests
 * held read-only, such as those embedded in a destination's state.
 */
export function parseFrozenManifest(text: string, source?: string): Manifest {
  return runSteps(parseFrozenManifestSteps(text, source));
}

/**
 * `parseFrozenManifest` as steps that pause every few thousand characters of the text and every
 * `STEP_FILES` files, for a caller that lets its event loop turn meanwhile (`runInSlices`).
 */
export function* parseFrozenManifestSteps(text: string, source?: string): Steps<Manifest> {
  return freeze(yield* readManifestTextSteps(text, source));
}

/**
 * A manifest already decoded by `JSON.parse` (as a state embeds it), checked under the same rules
 * and returned frozen, as `parseFrozenManifest` would return it for `JSON.stringify(value)`. As
 * steps that pause every `STEP_FILES` files, so that a caller may let its event loop turn while
 * a million-file manifest is checked. Paths and digests equal to `shared`'s at the same index are
 * taken from it, so a state's copy of the source manifest holds no strings of its own.
 */
export function* frozenManifestFromJsonSteps(
  value: unknown,
  source?: string,
  shared?: Manifest,
): Steps<Manifest> {
  const read = (context: Context, entry: unknown, index: number) =>
    decodedFile(context, entry, index, shared?.files[index]);
  return freeze(yield* readManifestDocumentSteps(new Context(source), decoded(value), read));
}

/**
 * Whether `manifest` came from `parseFrozenManifest` or `frozenManifestFromJsonSteps` and is
 * unchanged since (its `created` included): valid, and its files in canonical order.
 */
export function isFrozenManifest(manifest: Manifest): boolean {
  const created = frozen.get(manifest);
  return created !== undefined && manifest.created.getTime() === created;
}

function freeze(manifest: Manifest): Manifest {
  for (const file of manifest.files) Object.freeze(file);
  Object.freeze(manifest.files);
  Object.freeze(manifest);
  frozen.set(manifest, manifest.created.getTime());
  return manifest;
}

function readManifestText(text: string, source: string | undefined): Manifest {
  return runSteps(readManifestTextSteps(text, source));
}

function* readManifestTextSteps(text: string, source: string | undefined): Steps<Manifest> {
  const canonical = yield* canonicalManifestSteps(text, source);
  if (canonical !== undefined) return canonical;
  const context: Context = new Context(source);
  let document: JsonValue;
  try {
    document = yield* parseStrictJsonSteps(text);
  } catch (error) {
    if (error instanceof JsonSyntaxError) context.fail(undefined, error.message, error);
    throw error;
  }
  return yield* readManifestDocumentSteps(context, document, (context, entry, index) =>
    parseFile(context, entry as JsonValue, index),
  );
}

/**
 * A canonical text (what `manifest create` writes) read with `JSON.parse` in slices: the manifest
 * the strict parser gives, in a fraction of its time and memory. That the text is exactly the
 * canonical text of what was read proves it has no duplicate key and its numbers are integers as
 * written; undefined for any other text or any problem, which the strict parser reads again for
 * its verdict and message.
 */
function* canonicalManifestSteps(text: string, source?: string): Steps<Manifest | undefined> {
  try {
    const value = yield* parseJsonSteps(text);
    const document = decoded(value);
    const manifest = yield* readManifestDocumentSteps(new Context(source), document, decodedFile);
    return (yield* isManifestTextSteps(manifest, text)) ? manifest : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Checks a decoded manifest document. `files` entries pass through `entryValue` first, so that a
 * document decoded by `JSON.parse` is converted one entry at a time.
 */
function* readManifestDocumentSteps(
  context: Context,
  document: JsonValue,
  readFile: (context: Context, entry: unknown, index: number) => ManifestFile,
): Steps<Manifest> {
  if (!(document instanceof Map)) context.fail(undefined, "manifest must be a JSON object");
  checkFields(context, document, MANIFEST_FIELDS, "");

  const version = document.get("schema_version");
  if (!(version instanceof JsonNumber) || version.text !== String(MANIFEST_SCHEMA_VERSION)) {
    context.fail("schema_version", `schema_version must be 1, got ${show(version)}`);
  }
  const id = requireString(context, document, "id");
  const createdText = requireString(context, document, "created");
  const parsed = parseTimestamp(createdText);
  if (!parsed.ok) {
    context.fail(
      "created",
      `created must be an RFC 3339 timestamp with an offset (e.g. 2026-06-04T11:55:00Z), got ${show(createdText)}: ${parsed.problem}`,
    );
  }
  const digest = requireString(context, document, "digest");
  const files = document.get("files");
  if (!Array.isArray(files)) context.fail("files", `files must be an array, got ${show(files)}`);
  const manifestFiles: ManifestFile[] = [];
  for (const [index, entry] of files.entries()) {
    manifestFiles.push(readFile(context, entry, index));
    if (index % STEP_FILES === STEP_FILES - 1) yield;
  }
  return yield* checkManifestSteps(context, {
    id,
    created: parsed.date,
    digest,
    files: manifestFiles,
  });
}

export interface ManifestDraft {
  id: string;
  created: Date;
  files: readonly ManifestFile[];
}

/**
 * Builds a manifest from its parts, computing the bundle digest. Applies the same rules as
 * `parseManifest` and throws `ManifestError` for the same problems.
 */
export function buildManifest(draft: ManifestDraft): Manifest {
  return runSteps(buildManifestSteps(draft));
}

/** `buildManifest` as steps that pause every `STEP_FILES` files. */
export function* buildManifestSteps(draft: ManifestDraft): Steps<Manifest> {
  const context: Context = new Context(undefined);
  const files: ManifestFile[] = [];
  for (const [index, file] of draft.files.entries()) {
    if (index % STEP_FILES === STEP_FILES - 1) yield;
    const copy = { path: file.path, sha256: file.sha256, size: file.size };
    checkFile(context, copy, index);
    files.push(copy);
  }
  return yield* checkManifestSteps(context, {
    id: draft.id,
    created: draft.created,
    digest: undefined,
    files,
  });
}

/**
 * Manifests `parseManifest` returned, with the SHA-256 of their canonical text at that moment:
 * parsed from JSON, every value has the type the rules expect, so that text is valid and reads
 * back. (`buildManifest` takes in-memory values, which are not remembered.) Manifests are plain
 * mutable objects, so what is remembered is the text, not the object: see `verifiedManifestText`.
 */
const produced = new WeakMap<Manifest, string>();

/**
 * Manifests `parseFrozenManifest` returned, with the instant they were created at: frozen, so
 * still as parsed, save for `created` (a `Date` cannot be frozen), which is compared.
 */
const frozen = new WeakMap<Manifest, number>();

function remember(manifest: Manifest): Manifest {
  produced.set(manifest, textDigest(serializeManifest(manifest)));
  return manifest;
}

/**
 * The canonical text of `manifest` (`serializeManifest`) when it is known to be valid without
 * parsing it again: it came from `parseManifest` and still serialises exactly as it did then, so
 * its text is one that was valid, and a valid manifest's text always parses (the round trip is
 * property-tested). Undefined otherwise (the caller checks it), including for changes that alter
 * the text; changes that do not (the order of `files` in memory) do not matter to validity.
 * State validation uses it to skip re-reading the embedded manifest of a state it just parsed.
 */
export function verifiedManifestText(manifest: Manifest): string | undefined {
  const created = frozen.get(manifest);
  if (created !== undefined) {
    return manifest.created.getTime() === created ? serializeManifest(manifest) : undefined;
  }
  const digest = produced.get(manifest);
  if (digest === undefined) return undefined;
  let text: string;
  try {
    text = serializeManifest(manifest);
  } catch {
    // Changed into something that cannot even be written (an invalid `created`).
    return undefined;
  }
  return textDigest(text) === digest ? text : undefined;
}

function textDigest(text: string): string {
  return createHash("sha256").update(text, "utf8").digest("hex");
}

/** Why `id` is not a valid bundle id, or undefined. */
export function bundleIdProblem(id: string): string | undefined {
  // `RegExp.test` would turn a number or an array into a string that matches.
  if (typeof id !== "string") return `id must be a string, got ${show(id)}`;
  return BUNDLE_ID_PATTERN.test(id)
    ? undefined
    : `id must match ${BUNDLE_ID_PATTERN.source}, got ${show(id)}`;
}

/** Why `path` may not be listed in a manifest, or undefined when it may. */
export function manifestPathProblem(path: string): string | undefined {
  const problem = pathProblem(path);
  if (problem !== undefined) return problem;
  if (LONE_SURROGATE.test(path)) return "path is not well-formed Unicode";
  if (path === MANIFEST_FILE_NAME) return "manifest.json at the bundle root is the manifest itself";
  if (path === SIGNATURE_FILE_NAME) {
    return "manifest.json.sig at the bundle root is the manifest's signature, which cannot be listed in what it signs";
  }
  const reserved = reservedSegment(path);
  if (reserved !== undefined) {
    return `${reserved} is reserved for distributor's own files (state, lease, temp files) at any depth`;
  }
  return undefined;
}

class Context {
  constructor(readonly source: string | undefined) {}

  fail(field: string | undefined, detail: string, cause?: unknown): never {
    throw new ManifestError(detail, {
      ...(field === undefined ? {} : { field }),
      ...(this.source === undefined ? {} : { source: this.source }),
      ...(cause === undefined ? {} : { cause }),
    });
  }

  /** A manifest listing no files describes an empty bundle, reported as such (`empty_bundle`). */
  empty(): never {
    throw new ManifestError("files must not be empty", {
      field: "files",
      code: "empty_bundle",
      ...(this.source === undefined ? {} : { source: this.source }),
    });
  }
}

interface CheckedParts {
  id: string;
  created: Date;
  /** Declared digest, or undefined to compute it. */
  digest: string | undefined;
  files: ManifestFile[];
}

function* checkManifestSteps(context: Context, parts: CheckedParts): Steps<Manifest> {
  const idProblem = bundleIdProblem(parts.id);
  if (idProblem !== undefined) context.fail("id", idProblem);
  if (!isRepresentableDate(parts.created)) {
    context.fail("created", "created must be a valid date in the years 0000–9999");
  }
  if (parts.digest !== undefined && !isSha256Digest(parts.digest)) {
    context.fail("digest", `digest must be ${DIGEST_FORMAT}, got ${show(parts.digest)}`);
  }
  if (parts.files.length === 0) context.empty();
  yield* checkPathsTogetherSteps(context, parts.files);

  // Manifests are written in canonical order, so a parsed one is usually sorted already: checking
  // that is linear, and sorting a million paths again would be a step of seconds.
  const files = (yield* isSortedSteps(parts.files))
    ? parts.files
    : [...parts.files].sort((a, b) => compareLogicalPaths(a.path, b.path));
  yield;
  const computed = yield* sortedFilesDigestSteps(files);
  if (parts.digest !== undefined && parts.digest !== computed) {
    context.fail(
      "digest",
      `digest does not match the files: declared ${parts.digest}, computed ${computed}`,
    );
  }
  return { schemaVersion: 1, id: parts.id, created: parts.created, digest: computed, files };
}

function parseFile(context: Context, entry: JsonValue, index: number): ManifestFile {
  const at = `files[${index}]`;
  if (!(entry instanceof Map)) context.fail(at, `${at} must be an object, got ${show(entry)}`);
  checkFields(context, entry, FILE_FIELDS, `${at}.`);
  const path = requireString(context, entry, "path", `${at}.`);
  const sha256 = requireString(context, entry, "sha256", `${at}.`);
  const size = entry.get("size");
  if (
    !(size instanceof JsonNumber) ||
    !/^(0|[1-9][0-9]*)$/.test(size.text) ||
    !Number.isSafeInteger(size.value)
  ) {
    context.fail(
      `${at}.size`,
      `${at}.size must be a non-negative integer no larger than ${Number.MAX_SAFE_INTEGER}, got ${show(size)}`,
    );
  }
  const file = { path, sha256, size: size.value };
  checkFile(context, file, index);
  return file;
}

/**
 * A file entry of a decoded value (`JSON.parse`'s): one of exactly `path` and `sha256` (strings)
 * and `size` (a safe non-negative integer) is read as it is, without the strict parser's shape (a
 * map and a number's text per entry, at a million entries a second and hundreds of MiB); any
 * other entry goes through `parseFile`, for the same verdict and message.
 */
function decodedFile(
  context: Context,
  entry: unknown,
  index: number,
  shared?: ManifestFile,
): ManifestFile {
  if (typeof entry === "object" && entry !== null && !Array.isArray(entry)) {
    const { path, sha256, size } = entry as Record<string, unknown>;
    if (
      typeof path === "string" &&
      typeof sha256 === "string" &&
      typeof size === "number" &&
      Number.isSafeInteger(size) &&
      size >= 0 &&
      Object.keys(entry).length === 3 &&
      Object.hasOwn(entry, "path") &&
      Object.hasOwn(entry, "sha256") &&
      Object.hasOwn(entry, "size")
    ) {
      // -0 is written `0` and read back as 0, as the strict shape reads it.
      const file = {
        path: path === shared?.path ? shared.path : path,
        sha256: sha256 === shared?.sha256 ? shared.sha256 : sha256,
        size: size === 0 ? 0 : size,
      };
      checkFile(context, file, index);
      return file;
    }
  }
  return parseFile(context, fromDecodedJson(entry), index);
}

function checkFile(context: Context, file: ManifestFile, index: number): void {
  const at = `files[${index}]`;
  // In-memory drafts (`buildManifest`) are checked for the types the parser guarantees.
  for (const key of ["path", "sha256"] as const) {
    if (typeof file[key] !== "string") {
      context.fail(`${at}.${key}`, `${at}.${key} must be a string, got ${show(file[key])}`);
    }
  }
  const problem = manifestPathProblem(file.path);
  if (problem !== undefined) {
    context.fail(`${at}.path`, `${at}.path ${show(file.path)} is not allowed: ${problem}`);
  }
  if (!isSha256Digest(file.sha256)) {
    context.fail(`${at}.sha256`, `${at}.sha256 must be ${DIGEST_FORMAT}, got ${show(file.sha256)}`);
  }
  if (!Number.isSafeInteger(file.size) || file.size < 0) {
    context.fail(
      `${at}.size`,
      `${at}.size must be a non-negative integer no larger than ${Number.MAX_SAFE_INTEGER}, got ${show(file.size)}`,
    );
  }
}

/** `bundleDigest` of files already in canonical order, hashed in steps. */
function* sortedFilesDigestSteps(files: readonly ManifestFile[]): Steps<string> {
  const hash = createHash("sha256");
  for (let start = 0; start < files.length; start += STEP_FILES) {
    hash.update(digestLinesInOrder(files.slice(start, start + STEP_FILES)), "utf8");
    yield;
  }
  return `sha256:${hash.digest("hex")}`;
}

/** Duplicates, and a path listed both as a file and as a directory of another file. */
function* checkPathsTogetherSteps(context: Context, files: readonly ManifestFile[]): Steps<void> {
  const indexByPath = new Map<string, number>();
  for (const [index, file] of files.entries()) {
    if (index % STEP_FILES === STEP_FILES - 1) yield;
    const first = indexByPath.get(file.path);
    if (first !== undefined) {
      context.fail(
        `files[${index}].path`,
        `files[${index}].path duplicates files[${first}].path (${show(file.path)})`,
      );
    }
    indexByPath.set(file.path, index);
  }
  for (const [index, file] of files.entries()) {
    if (index % STEP_FILES === STEP_FILES - 1) yield;
    for (
      let slash = file.path.indexOf("/");
      slash !== -1;
      slash = file.path.indexOf("/", slash + 1)
    ) {
      const parent = indexByPath.get(file.path.slice(0, slash));
      if (parent !== undefined) {
        context.fail(
          `files[${index}].path`,
          `files[${index}].path ${show(file.path)} lies below files[${parent}].path ${show(file.path.slice(0, slash))}, which is a file`,
        );
      }
    }
  }
}

function checkFields(
  context: Context,
  object: JsonObject,
  known: readonly string[],
  prefix: string,
): void {
  for (const key of object.keys()) {
    if (!known.includes(key)) context.fail(`${prefix}${key}`, `unknown field ${prefix}${key}`);
  }
  for (const key of known) {
    if (!object.has(key)) context.fail(`${prefix}${key}`, `${prefix}${key} is required`);
  }
}

function requireString(context: Context, object: JsonObject, key: string, prefix = ""): string {
  const value = object.get(key);
  if (typeof value !== "string") {
    context.fail(`${prefix}${key}`, `${prefix}${key} must be a string, got ${show(value)}`);
  }
  return value;
}

const SHOWN_LENGTH = 80;

/** A value as it appears in messages: JSON-quoted and shortened. */
function show(value: JsonValue | number | undefined): string {
  let text: string;
  if (value === undefined) text = "nothing";
  else if (value instanceof JsonNumber) text = value.text;
  else if (value instanceof Map) text = "an object";
  else if (Array.isArray(value)) text = "an array";
  else text = JSON.stringify(value);
  return text.length > SHOWN_LENGTH ? `${text.slice(0, SHOWN_LENGTH)}…` : text;
}
