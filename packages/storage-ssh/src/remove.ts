import { mapBounded, type StorageOperation } from "@distributor/storage";
import { throwIfAborted, versionMismatch } from "@distributor/storage/adapter";
import { hasStatus, STATUS, sshError } from "./errors.js";
import { listDirectory } from "./list.js";
import { kindOf, type Remote, remoteVersion } from "./remote.js";
import { withSwapLock } from "./swap-lock.js";

/** Deletes running at once inside one directory. */
const DELETES_IN_FLIGHT = 16;

function child(parent: string, name: string): string {
  return parent === "/" ? `/${name}` : `${parent}/${name}`;
}

async function unlink(remote: Remote, remotePath: string): Promise<void> {
  try {
    await remote.call((sftp, done) => sftp.unlink(remotePath, done));
  } catch (error) {
    // Already gone (a concurrent delete) is what we wanted.
    if (!hasStatus(error, STATUS.NO_SUCH_FILE)) throw error;
  }
}

async function rmdir(remote: Remote, remotePath: string): Promise<void> {
  try {
    await remote.call((sftp, done) => sftp.rmdir(remotePath, done));
  } catch (error) {
    if (!hasStatus(error, STATUS.NO_SUCH_FILE)) throw error;
  }
}

/**
 * Removes a remote file or directory tree. Symlinks inside are unlinked, never followed, so
 * nothing outside the tree is touched.
 */
export async function removeTree(
  remote: Remote,
  remotePath: string,
  isDirectory: boolean,
  signal: AbortSignal | undefined,
): Promise<void> {
  throwIfAborted(signal);
  if (!isDirectory) {
    await unlink(remote, remotePath);
    return;
  }
  await emptyDirectory(remote, remotePath, undefined, "", signal);
  await rmdir(remote, remotePath);
}

/**
 * Removes everything inside a remote directory, keeping the directory, and with `keep` the kept
 * paths (relative, logical) and the directories above them.
 */
export async function emptyDirectory(
  remote: Remote,
  remotePath: string,
  keep: ReadonlySet<string> | undefined,
  relative: string,
  signal: AbortSignal | undefined,
): Promise<void> {
  const keptDirectories = new Set<string>();
  for (const path of keep ?? []) {
    for (let index = path.indexOf("/"); index !== -1; index = path.indexOf("/", index + 1)) {
      keptDirectories.add(path.slice(0, index));
    }
  }
  const visit = async (directory: string, below: string): Promise<void> => {
    const entries = (await listDirectory(remote, directory)) ?? [];
    await mapBounded(entries, DELETES_IN_FLIGHT, async (entry) => {
      throwIfAborted(signal);
      const path = below === "" ? entry.filename : `${below}/${entry.filename}`;
      if (keep?.has(path)) return;
      const isDirectory = kindOf(entry.attrs) === "directory";
      const target = child(directory, entry.filename);
      if (keptDirectories.has(path) && isDirectory) await visit(target, path);
      else await removeTree(remote, target, isDirectory, signal);
    });
  };
  await visit(remotePath, relative);
}

/**
 * Removes the now-empty directories above deleted logical paths, deepest first, never the root.
 * Best effort: a directory that is not empty (or cannot be removed) stays.
 */
export async function pruneEmptyParents(
  remote: Remote,
  deletedPaths: readonly string[],
): Promise<void> {
  const parents = new Set<string>();
  for (const path of deletedPaths) {
    for (let index = path.lastIndexOf("/"); index > 0; index = path.lastIndexOf("/", index - 1)) {
      parents.add(path.slice(0, index));
    }
  }
  const depth = (path: string) => path.split("/").length;
  const byDepth = [...parents].sort((left, right) => depth(right) - depth(left));
  const failed = new Set<string>();
  for (const directory of byDepth) {
    // A directory whose child could not be removed is not empty either.
    if ([...failed].some((path) => path.startsWith(`${directory}/`))) {
      failed.add(directory);
      continue;
    }
    try {
      await remote.call((sftp, done) => sftp.rmdir(remote.path(directory), done));
      remote.forget(directory);
    } catch {
      failed.add(directory);
    }
  }
}

/**
 * Unlinks the file at the logical path `target` only while it is still at version `expected`:
 * the check and the unlink run under the target's swap lock, as a compare-and-swap's check and
 * rename do, so a write of a newer version cannot land between them. A file at another version
 * stays and fails with `conflict`; one already gone (or whose directory is) is `missing`.
 */
export async function unlinkIfMatch(
  remote: Remote,
  target: string,
  expected: string,
  operation: StorageOperation,
): Promise<"deleted" | "missing"> {
  const slash = target.lastIndexOf("/");
  const parent = slash === -1 ? "" : target.slice(0, slash);
  const name = target.slice(slash + 1);
  try {
    return await withSwapLock(remote, parent, name, async () => {
      const state = await remote.inspect(target, operation);
      if (state.kind === "missing" || state.kind === "blocked") return "missing";
      if (state.kind !== "file") {
        throw sshError("unsupported", operation, target, "is not a regular file");
      }
      const found = remoteVersion(state.attrs);
      if (found !== expected) {
        throw sshError("conflict", operation, target, versionMismatch(expected, found));
      }
      try {
        await remote.call((sftp, done) => sftp.unlink(remote.path(target), done));
      } catch (error) {
        if (hasStatus(error, STATUS.NO_SUCH_FILE)) return "missing";
        throw error;
      }
      return "deleted";
    });
  } catch (error) {
    // The lock could not be created because the directory is gone: so is the target.
    if (hasStatus(error, STATUS.NO_SUCH_FILE)) return "missing";
    throw error;
  }
}
