import type { Stats } from "node:fs";
import { join, sep } from "node:path";
import { backendErrors } from "../adapter/backend-error.js";
import type { StorageError, StorageOperation } from "../errors.js";
import type { FsStore } from "../fs-protocol/store.js";
import type { LocalCalls } from "./calls.js";
import { BACKEND_NAME } from "./errno.js";

/** The resolved root every native path of one local backend hangs from, and its store. */
export interface LocalRoot {
  /** Absolute, resolved once when the backend is created. */
  readonly root: string;
  /** The protocol's view of the directory: its inspections refuse symlinks below the root. */
  readonly store: FsStore<number>;
  /** The system calls of this backend, blocking or on the thread pool. */
  readonly calls: LocalCalls;
}

/** Native path of a logical path or prefix; validated logical paths cannot climb out of the root. */
export function nativePath(root: string, logical: string): string {
  if (logical === "") return root;
  // A validated logical path is already clean (no empty, "." or ".." segment) and the root is
  // resolved, so on POSIX the native path is a concatenation; `join` normalised it again for
  // every lstat of every path component.
  if (sep === "/") return root === "/" ? `/${logical}` : `${root}/${logical}`;
  return join(root, ...logical.split("/"));
}

export const localError = backendErrors(BACKEND_NAME);

/**
 * The refusal of every operation on a backend whose root is not a directory (a destination
 * `path` that names a file): it names the configured root, since no logical path can fix it.
 */
export function rootNotDirectory(
  root: string,
  operation: StorageOperation,
  path: string,
): StorageError {
  return localError("conflict", operation, path, `root ${root} is not a directory`);
}

/** Version token of a local file: a replacement is a new inode, an in-place edit moves mtime. */
export function localVersion(stats: Stats): string {
  // Joined, not concatenated: one flat string, where `+` builds a rope of two or three nodes
  // (about 120 bytes more per token; a walk of the source keeps one per file).
  return [hex(stats.ino), hex(stats.size), hex(Math.round(stats.mtimeMs * 1000))].join("-");
}

/**
 * `value.toString(16)`, for an integer past 2³⁰ in pieces of 24 bits: V8 writes small integers in
 * hex quickly but a larger one (an mtime in microseconds) through its general double conversion,
 * about four times slower, and a publication computes a version per file.
 */
function hex(value: number): string {
  if (value < 0x40000000 || !Number.isSafeInteger(value)) return value.toString(16);
  const high = Math.floor(value / 0x1000000);
  return `${hex(high)}${(value - high * 0x1000000).toString(16).padStart(6, "0")}`;
}
