import { lstat, opendir, rmdir, unlink } from "node:fs/promises";
import { join } from "node:path";
import { throwIfAborted } from "../internal/abort.js";
import { parentPath } from "../paths.js";
import { type LocalRoot, nativePath } from "./context.js";
import { hasCode } from "./errno.js";

/**
 * Removes a file or a whole directory tree. Symlinks inside the tree are unlinked, never followed,
 * so nothing outside the tree is touched. Checks the signal between entries, unlike `fs.rm`.
 */
export async function removeTree(native: string, signal: AbortSignal | undefined): Promise<void> {
  throwIfAborted(signal);
  const stats = await lstat(native);
  if (!stats.isDirectory()) {
    await unlink(native);
    return;
  }
  await emptyDirectory(native, signal);
  await rmdir(native);
}

/** Removes everything inside a directory, keeping the directory. */
export async function emptyDirectory(
  native: string,
  signal: AbortSignal | undefined,
): Promise<void> {
  for await (const dirent of await opendir(native)) {
    const child = join(native, dirent.name);
    try {
      await removeTree(child, signal);
    } catch (error) {
      // Already gone (a concurrent delete) is what we wanted.
      if (!hasCode(error, "ENOENT")) throw error;
    }
  }
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
