import { StorageError, type StorageOperation } from "./errors.js";

const MAX_SEGMENT_BYTES = 255;

/**
 * Most entries one listing (a source's bundles, a destination's bundle paths, a recovery's
 * directories) may hold before it fails `limit_exceeded`: far above any publication's size, so
 * that `validation.max_files` and the store itself are the limits users meet (docs/operations.md,
 * "Limits"). A listing holds about 200 bytes per entry in memory.
 */
export const DEFAULT_LISTING_LIMIT = 10_000_000;
const DOT = 0x2e;
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what we reject
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/;

/** Returns why `path` is not a valid logical path, or undefined when it is valid. */
export function pathProblem(path: string): string | undefined {
  if (path === "") return "path is empty";
  if (path.includes("\\")) return "path contains a backslash";
  if (CONTROL_CHARACTERS.test(path)) return "path contains a control character";
  if (path.startsWith("/")) return "path is absolute";
  if (path.endsWith("/")) return "path has a trailing slash";
  // Segment by segment without splitting: this runs for every path of every manifest, state and
  // listing. With no empty, "." or ".." segment and no leading or trailing slash, a path is
  // already clean (`posix.normalize` returns it unchanged), so there is nothing more to check.
  for (let start = 0; start <= path.length; ) {
    let end = path.indexOf("/", start);
    if (end === -1) end = path.length;
    const length = end - start;
    if (length === 0) return "path has an empty segment";
    if (length <= 2 && path.charCodeAt(start) === DOT) {
      if (length === 1) return 'path has a "." segment';
      if (path.charCodeAt(start + 1) === DOT) return 'path has a ".." segment';
    }
    // A UTF-16 unit is at most 3 UTF-8 bytes, so only long segments need counting.
    if (length * 3 > MAX_SEGMENT_BYTES) {
      if (Buffer.byteLength(path.slice(start, end), "utf8") > MAX_SEGMENT_BYTES) {
        return `path segment is longer than ${MAX_SEGMENT_BYTES} bytes`;
      }
    }
    start = end + 1;
  }
  return undefined;
}

export function isValidPath(path: string): boolean {
  return pathProblem(path) === undefined;
}

/** A prefix is a valid path or the empty string (the backend root). */
export function isValidPrefix(prefix: string): boolean {
  return prefix === "" || isValidPath(prefix);
}

export function validatePath(
  path: string,
  operation: StorageOperation = "validate path",
  backend = "storage",
): string {
  const problem = pathProblem(path);
  if (problem !== undefined) {
    throw new StorageError({ kind: "invalid_path", operation, backend, path, detail: problem });
  }
  return path;
}

export function validatePrefix(
  prefix: string,
  operation: StorageOperation = "validate path",
  backend = "storage",
): string {
  if (prefix === "") return prefix;
  return validatePath(prefix, operation, backend);
}

/** Joins a prefix (possibly the root) with a relative logical path. */
export function join(prefix: string, path: string): string {
  validatePrefix(prefix);
  validatePath(path);
  return prefix === "" ? path : `${prefix}/${path}`;
}

/** Joins segments that may be empty (the root), validating the result. */
export function joinPrefix(prefix: string, path: string): string {
  if (path === "") return validatePrefix(prefix);
  return join(prefix, path);
}

/** How a logical path is shown to people: the root is `.`. */
export function displayPath(path: string): string {
  return path === "" ? "." : path;
}

/**
 * Where a logical path is, for people: the backend's location and the path joined by one `/`
 * (`local:/srv/site/.distributor.json`, `s3://bucket/prefix/a.txt`); the location alone for the
 * root.
 */
export function locatePath(location: string, path: string): string {
  if (path === "") return location;
  return location.endsWith("/") ? `${location}${path}` : `${location}/${path}`;
}

/** Parent prefix of a logical path (`""` for a top-level entry). */
export function parentPath(path: string): string {
  const index = path.lastIndexOf("/");
  return index === -1 ? "" : path.slice(0, index);
}

/** Full logical paths of `paths` below `prefix` (possibly the root), in order, each validated. */
export function joinEach(prefix: string, paths: readonly string[]): string[] {
  validatePrefix(prefix);
  return paths.map((path) => join(prefix, path));
}

/** True when `path` equals `prefix` or lies below it (the root contains everything). */
export function isWithinPrefix(prefix: string, path: string): boolean {
  return prefix === "" || path === prefix || path.startsWith(`${prefix}/`);
}

/** `path` relative to `prefix`; `path` must be within the prefix. */
export function relativeTo(prefix: string, path: string): string {
  if (prefix === "") return path;
  if (path === prefix) return "";
  return path.slice(prefix.length + 1);
}

/**
 * Orders logical paths by their UTF-8 bytes, the order S3 lists keys in. Plain `<` compares UTF-16
 * code units, which puts astral characters (surrogate pairs) before U+E000–U+FFFF; lifting
 * surrogates above the BMP restores code-point (= UTF-8 byte) order.
 */
export function compareLogicalPaths(left: string, right: string): number {
  const length = Math.min(left.length, right.length);
  for (let index = 0; index < length; index++) {
    const a = left.charCodeAt(index);
    const b = right.charCodeAt(index);
    if (a !== b) return codePointRank(a) - codePointRank(b);
  }
  return left.length - right.length;
}

function codePointRank(codeUnit: number): number {
  return codeUnit >= 0xd800 && codeUnit <= 0xdfff ? codeUnit + 0x10000 : codeUnit;
}
