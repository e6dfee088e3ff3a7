import { constants, type Dir, fsync as fsyncCallback, type Stats, statSync } from "node:fs";
import { copyFile, type FileHandle, mkdir, open, readlink, symlink } from "node:fs/promises";
import { setImmediate as nextTurn } from "node:timers/promises";
import { CHUNK_BYTES } from "../adapter/chunk-buffers.js";
import type { StorageError, StorageOperation } from "../errors.js";
import type {
  FsCapabilities,
  FsDirEntry,
  FsDriver,
  FsFailure,
  FsPath,
  FsStats,
} from "../fs-protocol/driver.js";
import { blockingCalls, type LocalCalls } from "./calls.js";
import { localVersion, nativePath, rootNotDirectory } from "./context.js";
import { BACKEND_NAME, errorCode, toStorageError } from "./errno.js";

// O_NOFOLLOW refuses a final symlink; O_NONBLOCK keeps a FIFO from blocking the open (regular
// files ignore it), so the fstat can refuse it instead.
export const READ_FLAGS =
  constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0) | (constants.O_NONBLOCK ?? 0);

/** Entries described between two turns of the event loop while a directory is read. */
const ENTRIES_PER_TURN = 512;

export const LOCAL_CAPABILITIES: FsCapabilities = {
  atomicReplace: true,
  hardLink: true,
  atomicMoveNoClobber: false,
  fileSync: true,
  directorySync: true,
  coarseMtime: false,
  orderedRequests: false,
  // A remembered directory can be moved out of the root and replaced by a symlink to where it
  // went, which its device and inode would not reveal; an lstat costs microseconds anyway.
  rememberDirectories: false,
  localClock: true,
  // A swap lock is held for a few calls. Through the thread pool (`serve`) those calls may queue
  // behind other writers' flushes, and whoever waits judges staleness by its own setting — a
  // CLI waiting on a lock `serve` holds too — so every local driver uses one generous value: a
  // lock this old was left by a killed process.
  staleSwapLockMs: 10_000,
  writeBlockBytes: CHUNK_BYTES,
  readBlockBytes: CHUNK_BYTES,
  writesInFlight: 1,
  readsInFlight: 1,
  parallelism: 16,
};

/** Failure of an operation at the root level that only a root that is not a directory causes. */
class RootNotDirectory extends Error {}

/**
 * The IO of a directory of the local filesystem, for `FsStore`. Opens, writes, lstats, links,
 * renames and unlinks go through a table of calls (`calls.ts`): synchronous by default, since
 * each answers from the page or inode cache in microseconds while a thread-pool round trip costs
 * tens of them in handoffs, several times per file; on the thread pool for a process that must
 * keep its event loop free. Flushes, which wait on the disk, are always on the thread pool so
 * that many files' flushes overlap.
 */
export class LocalDriver implements FsDriver<number> {
  readonly name = BACKEND_NAME;
  readonly capabilities: FsCapabilities;

  constructor(
    readonly root: string,
    readonly calls: LocalCalls = blockingCalls,
  ) {
    this.capabilities = LOCAL_CAPABILITIES;
  }

  lacks(capability: "atomicReplace" | "hardLink"): string {
    return capability === "hardLink"
      ? "the filesystem does not support hard links"
      : "the filesystem cannot rename over a file";
  }

  classify(error: unknown): FsFailure {
    switch (errorCode(error)) {
      case "ENOENT":
        return "not_found";
      case "EEXIST":
        return "exists";
      case "ENOTDIR":
        return "not_directory";
      case "EPERM":
      case "ENOTSUP":
      case "EOPNOTSUPP":
      // What a clone across filesystems, or on one without clones, fails with.
      case "EXDEV":
      case "ENOSYS":
        return "unsupported";
      default:
        return "other";
    }
  }

  toStorageError(error: unknown, operation: StorageOperation, path: string): StorageError {
    if (error instanceof RootNotDirectory) return rootNotDirectory(this.root, operation, path);
    return toStorageError(error, operation, path);
  }

  scope(): LocalDriver {
    return this;
  }

  async tidy(step: (io: LocalDriver) => Promise<unknown>): Promise<void> {
    try {
      await step(this);
    } catch {
      // Clean-up is best effort: the name is gone already, or the directory with it.
    }
  }

  async lstat(path: FsPath): Promise<FsStats | undefined> {
    let stats: Stats | undefined;
    try {
      stats = await this.calls.lstat(this.#native(path));
    } catch (error) {
      if (errorCode(error) !== "ENOTDIR") throw error;
      if (atRootLevel(path)) throw new RootNotDirectory();
      return undefined;
    }
    // Some Node versions report ENOTDIR as "no entry" too; below the first segment the parent
    // was just seen to be a directory, so only a root that is not one can cause it.
    if (stats === undefined && atRootLevel(path) && this.#rootIsNotDirectory()) {
      throw new RootNotDirectory();
    }
    return stats === undefined ? undefined : describe(stats);
  }

  async readdir(path: FsPath, stopAfter: number): Promise<FsDirEntry[] | undefined> {
    const native = this.#native(path);
    let dir: Dir;
    try {
      dir = await this.calls.opendir(native);
    } catch (error) {
      // A root not created yet, or a directory removed since it was listed: nothing below it.
      if (errorCode(error) === "ENOENT") return undefined;
      if (errorCode(error) === "ENOTDIR" && path === "") throw new RootNotDirectory();
      throw error;
    }
    // Names are read as bytes: string APIs silently replace bytes that are not UTF-8.
    const base = Buffer.from(`${native}/`);
    const entries: FsDirEntry[] = [];
    let seen = 0;
    try {
      for (
        let dirent = await this.calls.readEntry(dir);
        dirent !== null;
        dirent = await this.calls.readEntry(dir)
      ) {
        if (++seen % ENTRIES_PER_TURN === 0) await nextTurn();
        const raw = dirent.name;
        const stats = await this.calls.lstat(Buffer.concat([base, raw]));
        // Removed between listing and lstat: it no longer exists, so it is not listed.
        if (stats === undefined) continue;
        const text = raw.toString("utf8");
        const name = Buffer.from(text).equals(raw) ? text : raw;
        entries.push({ name, stats: describe(stats) });
        if (entries.length > stopAfter) break;
      }
    } finally {
      await this.calls.closeDir(dir);
    }
    return entries;
  }

  async makeRoot(): Promise<void> {
    await mkdir(this.root, { recursive: true });
  }

  mkdir(path: string): Promise<void> {
    return this.calls.mkdir(this.#native(path));
  }

  rmdir(path: FsPath): Promise<void> {
    return this.calls.rmdir(this.#native(path));
  }

  unlink(path: FsPath): Promise<void> {
    return this.calls.unlink(this.#native(path));
  }

  createExclusive(path: string): Promise<number> {
    return this.calls.open(this.#native(path), "wx", 0o666);
  }

  openRead(path: string): Promise<number> {
    return this.calls.open(this.#native(path), READ_FLAGS);
  }

  async write(fd: number, bytes: Uint8Array, position: number): Promise<void> {
    let offset = 0;
    while (offset < bytes.length) {
      offset += await this.calls.write(fd, bytes, offset, bytes.length - offset, position + offset);
    }
  }

  read(fd: number, into: Uint8Array, position: number): Promise<number> {
    return this.calls.read(fd, into, 0, into.length, position);
  }

  fsync(fd: number): Promise<void> {
    return new Promise((resolve, reject) => {
      fsyncCallback(fd, (error) => (error ? reject(error) : resolve()));
    });
  }

  async fstat(fd: number): Promise<FsStats> {
    return describe(await this.calls.fstat(fd));
  }

  async setMtime(fd: number, _stats: FsStats, mtimeMs: number): Promise<FsStats> {
    await this.calls.futimes(fd, mtimeMs / 1000);
    return describe(await this.calls.fstat(fd));
  }

  close(fd: number): Promise<void> {
    return this.calls.close(fd);
  }

  rename(from: string, to: string): Promise<void> {
    return this.calls.rename(this.#native(from), this.#native(to));
  }

  async renameNoReplace(from: string, to: string): Promise<void> {
    await this.calls.link(this.#native(from), this.#native(to));
    await this.calls.unlink(this.#native(from));
  }

  link(from: string, to: string): Promise<void> {
    return this.calls.link(this.#native(from), this.#native(to));
  }

  async clone(from: string, to: string): Promise<void> {
    // FICLONE_FORCE fails where the filesystem has no clones instead of copying the bytes;
    // EXCL keeps an existing `to` as it is.
    const flags = constants.COPYFILE_FICLONE_FORCE | constants.COPYFILE_EXCL;
    await copyFile(this.#native(from), this.#native(to), flags);
  }

  symlink(target: string, path: string): Promise<void> {
    return symlink(target, this.#native(path));
  }

  async readlink(path: string): Promise<string> {
    return readlink(this.#native(path), "utf8");
  }

  async syncDirectory(path: string): Promise<void> {
    let handle: FileHandle;
    try {
      handle = await open(this.#native(path), "r");
    } catch (error) {
      if (errorCode(error) === "ENOENT") return;
      throw error;
    }
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  }

  #native(path: FsPath): string | Buffer {
    if (typeof path === "string") return nativePath(this.root, path);
    return Buffer.concat([Buffer.from(`${this.root}/`), path]);
  }

  #rootIsNotDirectory(): boolean {
    try {
      // The root may be reached through symlinks (trusted configuration): follow them.
      const root = statSync(this.root, { throwIfNoEntry: false });
      return root !== undefined && !root.isDirectory();
    } catch (error) {
      return errorCode(error) === "ENOTDIR";
    }
  }
}

/** True for the root and the names directly in it. */
function atRootLevel(path: FsPath): boolean {
  return typeof path === "string" ? !path.includes("/") : !path.includes(0x2f);
}

function describe(stats: Stats): FsStats {
  const kind = stats.isSymbolicLink()
    ? "symlink"
    : stats.isDirectory()
      ? "directory"
      : stats.isFile()
        ? "file"
        : "other";
  return {
    kind,
    size: stats.size,
    mtimeMs: stats.mtimeMs,
    version: localVersion(stats),
    identity: `${stats.dev}-${localVersion(stats)}`,
  };
}
