import type { Dirent, Stats } from "node:fs";
import { lstatSync } from "node:fs";
import { opendir } from "node:fs/promises";
import type { StorageEntry, WalkOptions } from "../backend.js";
import { throwIfAborted } from "../internal/abort.js";
import { escapeName, nameProblem } from "../names.js";
import { compareLogicalPaths } from "../paths.js";
import {
  type LocalRoot,
  localError,
  localVersion,
  nativePath,
  rootNotDirectory,
} from "./context.js";
import { hasCode, toStorageError } from "./errno.js";
import { inspectPath } from "./inspect.js";

const OPERATION = "walk";

/**
 * Lists entries below `prefix` in byte order. Directories are read entry by entry and the walk stops
 * with `limit_exceeded` on the first entry past the limit, so memory stays bounded by the limit.
 * Every entry is listed, never followed: symlinks and special files as `symlink` / `other`, and a
 * name that is not a logical path (not UTF-8, a control character, a backslash) escaped, with its
 * `nameProblem`; the walk descends only into directories it can address. Names are read as bytes,
 * because string APIs silently replace bytes that are not UTF-8. A missing prefix, or one that is
 * a file, has nothing below it and yields an empty list.
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
      dir = await opendir(nativePath(local, directory), { encoding: "buffer" as BufferEncoding });
    } catch (error) {
      // A root not created yet, or a directory removed since it was listed: nothing below it.
      if (hasCode(error, "ENOENT")) continue;
      if (directory === "" && hasCode(error, "ENOTDIR"))
        throw rootNotDirectory(local, OPERATION, "");
      // Name the directory that failed (an unreadable one deep below the prefix, say).
      throw toStorageError(error, OPERATION, directory === "" ? prefix : directory);
    }
    // The directory is read through the thread pool; each entry's lstat is synchronous, as in
    // inspect.ts: the inode is cached after the read, and a round trip per entry would cost more.
    const base = Buffer.from(`${nativePath(local, directory)}/`);
    for await (const dirent of dir) {
      throwIfAborted(signal);
      const entry = describe(base, directory, dirent as unknown as Dirent<Buffer>);
      // Removed between listing and lstat: it no longer exists, so it is not listed.
      if (entry === undefined) continue;
      entries.push(entry);
      if (entries.length > limit) {
        throw localError("limit_exceeded", OPERATION, prefix, `more than ${limit} entries`);
      }
      if (entry.kind === "directory" && entry.nameProblem === undefined && options.recursive) {
        pending.push(entry.path);
      }
    }
  }
  return entries.sort((left, right) => compareLogicalPaths(left.path, right.path));
}

function describe(
  base: Buffer,
  directory: string,
  dirent: Dirent<Buffer>,
): StorageEntry | undefined {
  const rawName = dirent.name;
  const problem = nameProblem(rawName);
  const name = problem === undefined ? rawName.toString("utf8") : escapeName(rawName);
  const path = directory === "" ? name : `${directory}/${name}`;
  const native = Buffer.concat([base, rawName]);
  let stats: Stats | undefined;
  try {
    stats = lstatSync(native, { throwIfNoEntry: false });
  } catch (error) {
    throw toStorageError(error, OPERATION, path);
  }
  if (stats === undefined) return undefined;
  const entry: StorageEntry = { path, kind: kindOf(stats), size: 0, modifiedAt: stats.mtime };
  if (entry.kind === "file") {
    entry.size = stats.size;
    entry.version = localVersion(stats);
  }
  if (problem !== undefined) entry.nameProblem = problem;
  return entry;
}

function kindOf(stats: Stats): StorageEntry["kind"] {
  if (stats.isSymbolicLink()) return "symlink";
  if (stats.isDirectory()) return "directory";
  if (stats.isFile()) return "file";
  return "other";
}
