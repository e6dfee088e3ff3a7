import { lstat, opendir, rmdir, unlink } from "node:fs/promises";
import { throwIfAborted } from "../internal/abort.js";
import { parentPath } from "../paths.js";
import { type LocalRoot, nativePath } from "./context.js";
import { hasCode } from "./errno.js";

/**
 * Removes a file or a whole directory tree. Symlinks inside the tree are unlinked, never followed,
 * so nothing outside the tree is touched. Checks the signal between entries, unlike `fs.rm`.
 */
export async function removeTree(
  native: string | Buffer,
  signal: AbortSignal | undefined,
): Promise<void> {
  throwIfAborted(signal);
  const stats = await lstat(native);
  if (!stats.isDirectory()) {
    await unlink(native);
    return;
  }
  await emptyDirectory(native, signal);
  await rmdir(native);
}

/**
 * Removes everything inside a directory, keeping the directory. Names are read as raw bytes, so
 * an entry whose name is not UTF-8 is removed too instead of being looked up under a mangled name.
 */
export async function emptyDirectory(
  native: string | Buffer,
  signal: AbortSignal | undefined,
): Promise<void> {
  const parent = Buffer.concat([Buffer.from(native), Buffer.from("/")]);
  for await (const dirent of await opendir(native, { encoding: "buffer" as BufferEncoding })) {
    const child = Buffer.concat([parent, dirent.name as unknown as Buffer]);
    try {
      await removeTree(child, signal);
    } catch (error) {
      // Already gone (a concurrent delete) is what we wanted.
      if (!hasCode(error, "ENOENT")) throw error;
    }
  }
}

/**
 * Removes everything below a directory except the `keep` paths (relative, logical) and the
 * directories above them. Names are read as bytes, like `emptyDirectory`.
 */
export async function emptyDirectoryExcept(
  native: string,
  keep: ReadonlySet<string>,
  signal: AbortSignal | undefined,
): Promise<void> {
  const keptDirectories = new Set<string>();
  for (const path of keep) {
    for (let index = path.indexOf("/"); index !== -1; index = path.indexOf("/", index + 1)) {
      keptDirectories.add(path.slice(0, index));
    }
  }
  const visit = async (directory: Buffer, relative: string): Promise<void> => {
    const parent = Buffer.concat([directory, Buffer.from("/")]);
    for await (const dirent of await opendir(directory, { encoding: "buffer" as BufferEncoding })) {
      throwIfAborted(signal);
      const rawName = dirent.name as unknown as Buffer;
      const child = Buffer.concat([parent, rawName]);
      // A name that is not UTF-8 can match no kept (logical) path.
      const name = rawName.toString("utf8");
      const path = relative === "" ? name : `${relative}/${name}`;
      if (keep.has(path)) continue;
      try {
        if (keptDirectories.has(path) && dirent.isDirectory()) await visit(child, path);
        else await removeTree(child, signal);
      } catch (error) {
        if (!hasCode(error, "ENOENT")) throw error;
      }
    }
  };
  await visit(Buffer.from(native), "");
}

/**
 * Removes the now-empty directories above a deleted logical path, deepest first, stopping at the
 * first one that is not empty and never removing the root. Best effort: a directory that cannot be
 * removed is left in place, because the delete itself already succeeded.
 */
export async function pruneEmptyParents(local: LocalRoot, deletedPath: string): Promise<void> {
  for (let parent = parentPath(deletedPath); parent !== ""; parent = parentPath(parent)) {
    try {
      await rmdir(nativePath(local, parent));
    } catch {
      return;
    }
  }
}
