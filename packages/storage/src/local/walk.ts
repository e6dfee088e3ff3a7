import type { Dirent, Stats } from "node:fs";
import { type Dir, lstatSync, opendirSync } from "node:fs";
import { setImmediate as nextTurn } from "node:timers/promises";
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
 * Directories opened plus entries described between two turns of the event loop: the calls are
 * synchronous, so without a turn now and then a walk of 100 000 entries would hold off signals,
 * timers (lease renewals, progress) and every other request of `distributor serve` until it
 * ended, and an abort would take effect only after it.
 */
const STEPS_PER_TURN = 512;

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
  let steps = 0;
  while (pending.length > 0) {
    const directory = pending.pop()!;
    if (++steps % STEPS_PER_TURN === 0) await nextTurn();
    throwIfAborted(signal);
    let dir: Dir;
    try {
      dir = opendirSync(nativePath(local, directory), {
        encoding: "buffer" as BufferEncoding,
        bufferSize: 1024,
      });
    } catch (error) {
      // A root not created yet, or a directory removed since it was listed: nothing below it.
      if (hasCode(error, "ENOENT")) continue;
      if (directory === "" && hasCode(error, "ENOTDIR"))
        throw rootNotDirectory(local, OPERATION, "");
      // Name the directory that failed (an unreadable one deep below the prefix, say).
      throw toStorageError(error, OPERATION, directory === "" ? prefix : directory);
    }
    // The directory is read synchronously in batches of up to 1 024 entries, and each entry is
    // lstat'ed synchronously, as in inspect.ts: the inode is cached after the read. Through the
    // thread pool every 32-entry batch cost a round trip, and a 20 000-file walk spent 150 ms of
    // its 300 ms waiting for them. A turn every `STEPS_PER_TURN` steps keeps the loop live.
    try {
      const base = Buffer.from(`${nativePath(local, directory)}/`);
      const named = directory === "" ? prefix : directory;
      for (let dirent = nextEntry(dir, named); dirent !== null; dirent = nextEntry(dir, named)) {
        if (++steps % STEPS_PER_TURN === 0) await nextTurn();
        throwIfAborted(signal);
        const entry = describe(base, directory, dirent);
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
    } finally {
      dir.closeSync();
    }
  }
  return entries.sort((left, right) => compareLogicalPaths(left.path, right.path));
}

/** The directory's next entry; a read failing part-way (EIO, say) names the directory. */
function nextEntry(dir: Dir, path: string): Dirent<Buffer> | null {
  try {
    return dir.readSync() as unknown as Dirent<Buffer> | null;
  } catch (error) {
    throw toStorageError(error, OPERATION, path);
  }
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
