import type { Dirent } from "node:fs";
import { lstat, opendir } from "node:fs/promises";
import type { StorageEntry, WalkOptions } from "../backend.js";
import { throwIfAborted } from "../internal/abort.js";
import { compareLogicalPaths, isValidPath } from "../paths.js";
import { type LocalRoot, localError, nativePath, symlinkRefused } from "./context.js";
import { hasCode, toStorageError } from "./errno.js";
import { inspectPath } from "./inspect.js";

const OPERATION = "walk";

/**
 * Lists entries below `prefix` in byte order. Directories are read entry by entry and the walk stops
 * with `limit_exceeded` on the first entry past the limit, so memory stays bounded by the limit.
 * A symlink met anywhere fails the walk (`unsupported`) rather than being silently skipped, so that
 * callers looking for unmanaged content never miss it. A missing prefix, or one that is a file, has
 * nothing below it and yields an empty list.
 */
export async function walkTree(
  local: LocalRoot,
  prefix: string,
  options: WalkOptions,
): Promise<StorageEntry[]> {
  const { signal, limit } = options;
  if (prefix !== "") {
    const state = await inspectPath(local, prefix, OPERATION);
    if (state.kind !== "directory") return [];
  }
  const entries: StorageEntry[] = [];
  const pending: string[] = [prefix];
  while (pending.length > 0) {
    const directory = pending.pop()!;
    throwIfAborted(signal);
    let dir: Awaited<ReturnType<typeof opendir>>;
    try {
      dir = await opendir(nativePath(local, directory));
    } catch (error) {
      // A root not created yet, or a directory removed since it was listed: nothing below it.
      if (hasCode(error, "ENOENT")) continue;
      throw toStorageError(error, OPERATION, prefix);
    }
    for await (const dirent of dir) {
      throwIfAborted(signal);
      if (!isValidPath(dirent.name)) {
        const where = directory === "" ? "the root" : `"${directory}"`;
        const detail = `entry ${JSON.stringify(dirent.name)} in ${where} is not a valid logical path`;
        throw localError("unsupported", OPERATION, prefix, detail);
      }
      const path = directory === "" ? dirent.name : `${directory}/${dirent.name}`;
      const entry = await describe(local, prefix, path, dirent);
      // Removed between listing and lstat: it no longer exists, so it is not listed.
      if (entry === undefined) continue;
      entries.push(entry);
      if (entries.length > limit) {
        throw localError("limit_exceeded", OPERATION, prefix, `more than ${limit} entries`);
      }
      if (entry.kind === "directory" && options.recursive) pending.push(path);
    }
  }
  return entries.sort((left, right) => compareLogicalPaths(left.path, right.path));
}

async function describe(
  local: LocalRoot,
  prefix: string,
  path: string,
  dirent: Dirent,
): Promise<StorageEntry | undefined> {
  if (dirent.isSymbolicLink()) throw symlinkRefused(OPERATION, prefix, path);
  let stats: Awaited<ReturnType<typeof lstat>>;
  try {
    stats = await lstat(nativePath(local, path));
  } catch (error) {
    if (hasCode(error, "ENOENT")) return undefined;
    throw toStorageError(error, OPERATION, path);
  }
  if (stats.isSymbolicLink()) throw symlinkRefused(OPERATION, prefix, path);
  if (stats.isDirectory()) return { path, kind: "directory", size: 0, modifiedAt: stats.mtime };
  if (stats.isFile()) return { path, kind: "file", size: stats.size, modifiedAt: stats.mtime };
  throw localError(
    "unsupported",
    OPERATION,
    prefix,
    `"${path}" is not a regular file or directory`,
  );
}
