import type { Stats } from "node:fs";
import { join, sep } from "node:path";
import type { StorageError, StorageOperation } from "../errors.js";
import { backendErrors } from "../internal/backend-error.js";
import { BACKEND_NAME } from "./errno.js";

/** The resolved root every native path of one local backend hangs from. */
export interface LocalRoot {
  /** Absolute, resolved once when the backend is created. */
  readonly root: string;
  /**
   * Whether every written file is flushed to disk before it is moved into place. Commit files
   * (the state and the lease) are flushed, with their directory, either way.
   */
  readonly fsync: boolean;
  /**
   * Directories (native paths) whose new entries are not flushed yet: the parents of files moved
   * into place and of directories created. A commit flushes them first (in `fsync` mode), so the
   * state never records an output whose name a power cut could still lose.
   */
  readonly unflushed: Set<string>;
  /**
   * Directories below the root (native paths) with writes of this backend in flight below them,
   * and how many. A directory one of them made is removed once the last of them ends, if it is
   * empty then (none of them put a file there), so that an interrupted publish leaves no empty
   * directory behind for the next run to take for unmanaged content. See `writeAtomically`.
   */
  readonly writing: Map<string, number>;
  /** The directories those writes made, until the last write below each ends. */
  readonly made: Set<string>;
}

/** Native path of a logical path or prefix; validated logical paths cannot climb out of the root. */
export function nativePath(local: LocalRoot, logical: string): string {
  if (logical === "") return local.root;
  // A validated logical path is already clean (no empty, "." or ".." segment) and the root is
  // resolved, so on POSIX the native path is a concatenation; `join` normalised it again for
  // every lstat of every path component.
  if (sep === "/") return local.root === "/" ? `/${logical}` : `${local.root}/${logical}`;
  return join(local.root, ...logical.split("/"));
}

export const localError = backendErrors(BACKEND_NAME);

/** The refusal every operation reports when it meets a symlink below the root. */
export function symlinkRefused(
  operation: StorageOperation,
  path: string,
  symlinkPath: string,
): StorageError {
  return localError(
    "unsupported",
    operation,
    path,
    `"${symlinkPath}" is a symlink; symlinks are refused`,
  );
}

/**
 * The refusal of every operation on a backend whose root is not a directory (a destination
 * `path` that names a file): it names the configured root, since no logical path can fix it.
 */
export function rootNotDirectory(
  local: LocalRoot,
  operation: StorageOperation,
  path: string,
): StorageError {
  return localError("conflict", operation, path, `root ${local.root} is not a directory`);
}

/** Version token of a local file: a replacement is a new inode, an in-place edit moves mtime. */
export function localVersion(stats: Stats): string {
  return `${stats.ino.toString(16)}-${stats.size.toString(16)}-${Math.round(stats.mtimeMs * 1000).toString(16)}`;
}
