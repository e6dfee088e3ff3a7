import { throwIfAborted } from "../adapter/abort.js";
import { versionMismatch } from "../adapter/backend-error.js";
import { mapBounded } from "../concurrency.js";
import type { StorageOperation } from "../errors.js";
import type { FsDirEntry, FsDriver, FsPath } from "./driver.js";
import { type FsStore, splitPath } from "./store.js";
import { withSwapLock } from "./swap-lock.js";

/**
 * Unlinks the file at `target` only while it is still at version `expected`: the check and the
 * unlink run under the target's swap lock, as a compare-and-swap's check and rename do, so a
 * write of a newer version cannot land between them. A file at another version stays and fails
 * with `conflict`; one already gone (or whose directory is) is `missing`.
 */
export async function unlinkIfMatch<Handle>(
  store: FsStore<Handle>,
  io: FsDriver<Handle>,
  target: string,
  expected: string,
  operation: StorageOperation,
  signal: AbortSignal | undefined,
): Promise<"deleted" | "missing"> {
  const { parent, name } = splitPath(target);
  try {
    return await withSwapLock(
      store,
      parent,
      name,
      async () => {
        const state = await store.inspect(io, target, operation);
        if (state.kind === "missing" || state.kind === "blocked") return "missing";
        if (state.kind !== "file") {
          throw store.error("unsupported", operation, target, "is not a regular file");
        }
        if (state.stats.version !== expected) {
          const detail = versionMismatch(expected, state.stats.version);
          throw store.error("conflict", operation, target, detail);
        }
        try {
          await io.unlink(target);
        } catch (error) {
          if (io.classify(error) === "not_found") return "missing";
          throw error;
        }
        return "deleted";
      },
      { signal },
    );
  } catch (error) {
    // The lock could not be created because the directory is gone: so is the target.
    if (io.classify(error) === "not_found") return "missing";
    throw error;
  }
}

/** `name` inside `parent`, as bytes once either is not a string. */
export function childPath(parent: FsPath, name: string | Uint8Array): FsPath {
  if (typeof parent === "string" && typeof name === "string") {
    return parent === "" ? name : `${parent}/${name}`;
  }
  if (typeof parent === "string" && parent === "") return name;
  return Buffer.concat([Buffer.from(parent), Buffer.from("/"), Buffer.from(name)]);
}

/**
 * Removes a file or a whole directory tree. Symlinks inside are unlinked, never followed, so
 * nothing outside the tree is touched; names that are not UTF-8 are removed by their bytes.
 * Something already gone (a concurrent delete) is what we wanted.
 */
export async function removeTree<Handle>(
  io: FsDriver<Handle>,
  path: FsPath,
  isDirectory: boolean,
  signal: AbortSignal | undefined,
): Promise<void> {
  throwIfAborted(signal);
  try {
    if (!isDirectory) {
      await io.unlink(path);
      return;
    }
    await emptyDirectory(io, path, undefined, signal);
    await io.rmdir(path);
  } catch (error) {
    if (io.classify(error) !== "not_found") throw error;
  }
}

/**
 * Removes everything inside a directory, keeping the directory, and with `keep` the kept paths
 * (relative to it, logical) and the directories above them.
 */
export async function emptyDirectory<Handle>(
  io: FsDriver<Handle>,
  directory: FsPath,
  keep: ReadonlySet<string> | undefined,
  signal: AbortSignal | undefined,
): Promise<void> {
  const keptDirectories = new Set<string>();
  for (const path of keep ?? []) {
    for (let index = path.indexOf("/"); index !== -1; index = path.indexOf("/", index + 1)) {
      keptDirectories.add(path.slice(0, index));
    }
  }
  const visit = async (at: FsPath, below: string): Promise<void> => {
    const entries: FsDirEntry[] = (await io.readdir(at, Number.POSITIVE_INFINITY)) ?? [];
    await mapBounded(entries, io.capabilities.parallelism, async (entry) => {
      throwIfAborted(signal);
      const target = childPath(at, entry.name);
      const isDirectory = entry.stats.kind === "directory";
      // A name that is not UTF-8 can match no kept (logical) path.
      if (keep !== undefined && typeof entry.name === "string") {
        const path = below === "" ? entry.name : `${below}/${entry.name}`;
        if (keep.has(path)) return;
        if (keptDirectories.has(path) && isDirectory) return visit(target, path);
      }
      await removeTree(io, target, isDirectory, signal);
    });
  };
  await visit(directory, "");
}

/**
 * Removes the now-empty directories above deleted logical paths, deepest first, never the root,
 * and returns those it removed. Best effort: a directory that is not empty (or cannot be
 * removed) stays, because the delete itself already succeeded.
 */
export async function pruneEmptyParents<Handle>(
  store: FsStore<Handle>,
  io: FsDriver<Handle>,
  deletedPaths: readonly string[],
): Promise<string[]> {
  const parents = new Set<string>();
  for (const path of deletedPaths) {
    for (let index = path.lastIndexOf("/"); index > 0; index = path.lastIndexOf("/", index - 1)) {
      parents.add(path.slice(0, index));
    }
  }
  const depth = (path: string) => path.split("/").length;
  const byDepth = [...parents].sort((left, right) => depth(right) - depth(left));
  const failed = new Set<string>();
  const removed: string[] = [];
  for (const directory of byDepth) {
    // A directory whose child could not be removed is not empty either.
    if ([...failed].some((path) => path.startsWith(`${directory}/`))) {
      failed.add(directory);
      continue;
    }
    try {
      await io.rmdir(directory);
      store.forget(directory);
      removed.push(directory);
    } catch {
      failed.add(directory);
    }
  }
  return removed;
}
