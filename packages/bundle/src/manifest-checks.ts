import { createHash } from "node:crypto";
import {
  compareLogicalPaths,
  pathProblem,
  reservedSegment,
  type Steps,
} from "@distributor/storage";
import { fromDecodedJson } from "./decoded-json.js";
import { digestLinesInOrder, isSha256Digest } from "./digest.js";
import { ManifestError } from "./errors.js";
import { isSortedSteps, STEP_FILES } from "./manifest-order.js";
import type { Manifest, ManifestFile } from "./manifest-types.js";
import { JsonNumber, type JsonObject, type JsonValue } from "./strict-json.js";
import { isRepresentableDate } from "./timestamp.js";

// The rules a manifest is checked by, whichever way it was read (docs/design/bundles.md).

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

const FILE_FIELDS = ["path", "sha256", "size"] as const;
const DIGEST_FORMAT = "sha256:<64 lowercase hex>";
// In unicode mode a surrogate class matches only unpaired surrogates, which UTF-8 cannot encode.
const LONE_SURROGATE = /[\ud800-\udfff]/u;

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

export class Context {
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

export interface CheckedParts {
  id: string;
  created: Date;
  /** Declared digest, or undefined to compute it. */
  digest: string | undefined;
  files: ManifestFile[];
}

/**
 * Checks a manifest's parts. `filesDigest` is given for files known to be a valid list in
 * canonical order (a frozen manifest's own): their digest, so they are not checked or hashed again.
 */
export function* checkManifestSteps(
  context: Context,
  parts: CheckedParts,
  filesDigest?: string,
): Steps<Manifest> {
  const idProblem = bundleIdProblem(parts.id);
  if (idProblem !== undefined) context.fail("id", idProblem);
  if (!isRepresentableDate(parts.created)) {
    context.fail("created", "created must be a valid date in the years 0000–9999");
  }
  if (parts.digest !== undefined && !isSha256Digest(parts.digest)) {
    context.fail("digest", `digest must be ${DIGEST_FORMAT}, got ${show(parts.digest)}`);
  }
  if (parts.files.length === 0) context.empty();
  let files = parts.files;
  let computed = filesDigest;
  if (computed === undefined) {
    yield* checkPathsTogetherSteps(context, parts.files);
    // Manifests are written in canonical order, so a parsed one is usually sorted already:
    // checking that is linear, and sorting a million paths again would be a step of seconds.
    if (!(yield* isSortedSteps(parts.files))) {
      files = [...parts.files].sort((a, b) => compareLogicalPaths(a.path, b.path));
    }
    yield;
    computed = yield* sortedFilesDigestSteps(files);
  }
  if (parts.digest !== undefined && parts.digest !== computed) {
    context.fail(
      "digest",
      `digest does not match the files: declared ${parts.digest}, computed ${computed}`,
    );
  }
  return { schemaVersion: 1, id: parts.id, created: parts.created, digest: computed, files };
}

export function parseFile(context: Context, entry: JsonValue, index: number): ManifestFile {
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
export function decodedFile(
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
      // The shared entry itself when the reader kept it (`sharedManifestFile`); -0 reads as 0.
      const file =
        entry === shared
          ? shared
          : {
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

export function checkFile(context: Context, file: ManifestFile, index: number): void {
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
  if (yield* sortedPathsHoldTogetherSteps(context, files)) return;
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

/**
 * `checkPathsTogetherSteps` for files in strictly increasing byte order (a canonical manifest),
 * with the same verdicts, without a map of every path: no two paths are equal, and each directory
 * that files lie in is looked up once among the files, by bisection, for an ancestor that is a
 * file. False, having checked nothing, when the files are not in that order.
 */
function* sortedPathsHoldTogetherSteps(
  context: Context,
  files: readonly ManifestFile[],
): Steps<boolean> {
  for (let index = 1; index < files.length; index++) {
    if (index % STEP_FILES === 0) yield;
    if (compareLogicalPaths(files[index - 1]!.path, files[index]!.path) >= 0) return false;
  }
  let checked: string | undefined;
  for (const [index, file] of files.entries()) {
    if (index % STEP_FILES === STEP_FILES - 1) yield;
    const directory = file.path.slice(0, Math.max(0, file.path.lastIndexOf("/")));
    if (directory === checked) continue;
    for (
      let slash = file.path.indexOf("/");
      slash !== -1;
      slash = file.path.indexOf("/", slash + 1)
    ) {
      const parent = indexOfPath(files, file.path.slice(0, slash));
      if (parent !== undefined) {
        context.fail(
          `files[${index}].path`,
          `files[${index}].path ${show(file.path)} lies below files[${parent}].path ${show(file.path.slice(0, slash))}, which is a file`,
        );
      }
    }
    checked = directory;
  }
  return true;
}

/** The index of `path` among files sorted by path, or undefined. */
function indexOfPath(files: readonly ManifestFile[], path: string): number | undefined {
  let low = 0;
  let high = files.length - 1;
  while (low <= high) {
    const middle = (low + high) >>> 1;
    const order = compareLogicalPaths(files[middle]!.path, path);
    if (order === 0) return middle;
    if (order < 0) low = middle + 1;
    else high = middle - 1;
  }
  return undefined;
}

export function checkFields(
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

export function requireString(
  context: Context,
  object: JsonObject,
  key: string,
  prefix = "",
): string {
  const value = object.get(key);
  if (typeof value !== "string") {
    context.fail(`${prefix}${key}`, `${prefix}${key} must be a string, got ${show(value)}`);
  }
  return value;
}

const SHOWN_LENGTH = 80;

/** A value as it appears in messages: JSON-quoted and shortened. */
export function show(value: JsonValue | number | undefined): string {
  let text: string;
  if (value === undefined) text = "nothing";
  else if (value instanceof JsonNumber) text = value.text;
  else if (value instanceof Map) text = "an object";
  else if (Array.isArray(value)) text = "an array";
  else text = JSON.stringify(value);
  return text.length > SHOWN_LENGTH ? `${text.slice(0, SHOWN_LENGTH)}…` : text;
}
