import {
  closeSync,
  constants,
  type Dirent,
  fstatSync,
  fsync as fsyncCallback,
  futimesSync,
  linkSync,
  lstatSync,
  opendirSync,
  openSync,
  readSync,
  renameSync,
  rmdirSync,
  type Stats,
  statSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { type FileHandle, mkdir, open } from "node:fs/promises";
import { setImmediate as nextTurn } from "node:timers/promises";
import type { StorageError, StorageOperation } from "../errors.js";
import type {
  FsCapabilities,
  FsDirEntry,
  FsDriver,
  FsFailure,
  FsPath,
  FsStats,
} from "../fs-protocol/driver.js";
import { CHUNK_BYTES } from "../internal/chunk-buffers.js";
import { localVersion, nativePath, rootNotDirectory } from "./context.js";
import { BACKEND_NAME, errorCode, toStorageError } from "./errno.js";

// O_NOFOLLOW refuses a final symlink; O_NONBLOCK keeps a FIFO from blocking the open (regular
// files ignore it), so the fstat can refuse it instead.
export const READ_FLAGS =
  constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0) | (constants.O_NONBLOCK ?? 0);

/** Entries described between two turns of the event loop while a directory is read. */
const ENTRIES_PER_TURN = 512;

const CAPABILITIES: FsCapabilities = {
  atomicReplace: true,
  hardLink: true,
  fileSync: true,
  directorySync: true,
  coarseMtime: false,
  orderedRequests: false,
  // A remembered directory can be moved out of the root and replaced by a symlink to where it
  // went, which its device and inode would not reveal; an lstat costs microseconds anyway.
  rememberDirectories: false,
  localClock: true,
  // A swap lock is held for microseconds: one this old was left by a killed process.
  staleSwapLockMs: 2000,
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
 * renames and unlinks are synchronous: each answers from the page or inode cache in microseconds,
 * while a thread-pool round trip costs tens of them in handoffs, several times per file. Flushes,
 * which wait on the disk, stay on the thread pool so that many files' flushes overlap.
 */
export class LocalDriver implements FsDriver<number> {
  readonly name = BACKEND_NAME;
  readonly capabilities = CAPABILITIES;

  constructor(readonly root: string) {}

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
      stats = lstatSync(this.#native(path), { throwIfNoEntry: false });
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
    let dir: ReturnType<typeof opendirSync>;
    try {
      dir = opendirSync(native, { encoding: "buffer" as BufferEncoding, bufferSize: 1024 });
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
      for (let dirent = dir.readSync(); dirent !== null; dirent = dir.readSync()) {
        if (++seen % ENTRIES_PER_TURN === 0) await nextTurn();
        const raw = (dirent as unknown as Dirent<Buffer>).name;
        const stats = lstatSync(Buffer.concat([base, raw]), { throwIfNoEntry: false });
        // Removed between listing and lstat: it no longer exists, so it is not listed.
        if (stats === undefined) continue;
        const text = raw.toString("utf8");
        const name = Buffer.from(text).equals(raw) ? text : raw;
        entries.push({ name, stats: describe(stats) });
        if (entries.length > stopAfter) break;
      }
    } finally {
      dir.closeSync();
    }
    return entries;
  }

  async makeRoot(): Promise<void> {
    await mkdir(this.root, { recursive: true });
  }

  async mkdir(path: string): Promise<void> {
    await mkdir(this.#native(path));
  }

  async rmdir(path: FsPath): Promise<void> {
    rmdirSync(this.#native(path));
  }

  async unlink(path: FsPath): Promise<void> {
    unlinkSync(this.#native(path));
  }

  async createExclusive(path: string): Promise<number> {
    return openSync(this.#native(path), "wx", 0o666);
  }

  async openRead(path: string): Promise<number> {
    return openSync(this.#native(path), READ_FLAGS);
  }

  async write(fd: number, bytes: Uint8Array, position: number): Promise<void> {
    let offset = 0;
    while (offset < bytes.length) {
      offset += writeSync(fd, bytes, offset, bytes.length - offset, position + offset);
    }
  }

  async read(fd: number, into: Uint8Array, position: number): Promise<number> {
    return readSync(fd, into, 0, into.length, position);
  }

  fsync(fd: number): Promise<void> {
    return new Promise((resolve, reject) => {
      fsyncCallback(fd, (error) => (error ? reject(error) : resolve()));
    });
  }

  async fstat(fd: number): Promise<FsStats> {
    return describe(fstatSync(fd));
  }

  async setMtime(fd: number, _stats: FsStats, mtimeMs: number): Promise<FsStats> {
    futimesSync(fd, mtimeMs / 1000, mtimeMs / 1000);
    return describe(fstatSync(fd));
  }

  async close(fd: number): Promise<void> {
    closeSync(fd);
  }

  async rename(from: string, to: string): Promise<void> {
    renameSync(this.#native(from), this.#native(to));
  }

  async renameNoReplace(from: string, to: string): Promise<void> {
    linkSync(this.#native(from), this.#native(to));
    unlinkSync(this.#native(from));
  }

  async link(from: string, to: string): Promise<void> {
    linkSync(this.#native(from), this.#native(to));
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
