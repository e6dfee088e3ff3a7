import { StorageError, type StorageOperation } from "@distributor/storage";
import {
  CHUNK_BYTES,
  type FsCapabilities,
  type FsDirEntry,
  type FsDriver,
  type FsFailure,
  type FsKind,
  type FsPath,
  type FsStats,
} from "@distributor/storage/adapter";
import type { Attributes, FileEntryWithStats, SFTPWrapper } from "ssh2";
import { BACKEND_NAME, hasStatus, STATUS, sshError, toStorageError } from "./errors.js";
import { Cancellation, type Session, SFTP_EXTENSIONS } from "./session.js";

/** How long a cancelled operation still waits for its clean-up (see `SftpDriver.tidy`). */
const CLEANUP_GRACE_MS = 2_000;

/** Requests one file keeps outstanding, so a transfer is not one round trip per chunk. */
const REQUESTS_IN_FLIGHT = 8;

const S_IFMT = 0o170000;
const S_IFDIR = 0o040000;
const S_IFREG = 0o100000;
const S_IFLNK = 0o120000;

function kindOf(attrs: Attributes): FsKind {
  switch (attrs.mode & S_IFMT) {
    case S_IFREG:
      return "file";
    case S_IFDIR:
      return "directory";
    case S_IFLNK:
      return "symlink";
    default:
      return "other";
  }
}

/**
 * SFTP v3 attributes carry no inode and whole-second mtimes, so a version token is size and
 * mtime; the protocol keeps it unique per path by giving every replacement an mtime past the one
 * it replaces (`coarseMtime`).
 */
function describe(attrs: Attributes): FsStats {
  const version = `${attrs.size.toString(16)}-${attrs.mtime.toString(16)}`;
  return {
    kind: kindOf(attrs),
    size: attrs.size,
    mtimeMs: attrs.mtime * 1000,
    version,
    identity: version,
  };
}

/** What the server offers, read from the first channel's VERSION packet. */
function capabilitiesOf(session: Session): FsCapabilities {
  return {
    atomicReplace: session.supports("posixRename"),
    hardLink: session.supports("hardlink"),
    // OpenSSH, the server that offers hardlink@openssh.com, renames a regular file by link(2)
    // and unlink(2) within one request: a no-clobber move that no cut connection can split.
    atomicMoveNoClobber: session.supports("hardlink"),
    fileSync: session.supports("fsync"),
    directorySync: false,
    coarseMtime: true,
    orderedRequests: true,
    rememberDirectories: true,
    localClock: false,
    // A few round trips hold a swap lock; one unchanged this long was left by a dead writer.
    staleSwapLockMs: 5_000,
    writeBlockBytes: Math.max(1024, Math.min(CHUNK_BYTES, session.maxWriteLength)),
    readBlockBytes: session.maxReadLength,
    writesInFlight: REQUESTS_IN_FLIGHT,
    readsInFlight: REQUESTS_IN_FLIGHT,
    parallelism: 16,
  };
}

/** What every view of one driver shares. */
interface Shared {
  /** Set once the root is known to exist as a directory (it is created on first write). */
  rootReady: boolean;
  capabilities: FsCapabilities;
}

/**
 * The IO of a directory on an SFTP server, for `FsStore`. A view (`scope`) binds requests to one
 * operation's abort signal and, pinned, to one channel of the session (a handle is valid only on
 * the channel that opened it). What the server offers is declared in `capabilities`: without
 * `posix-rename@openssh.com` nothing can be replaced, without `hardlink@openssh.com` creates
 * move the temp file with the plain SFTP rename (which OpenSSH implements with link(2) and which
 * the protocol has fail when the target exists), without `fsync@openssh.com` files are not
 * flushed; directories never are.
 */
export class SftpDriver implements FsDriver<Buffer> {
  readonly name = BACKEND_NAME;
  readonly capabilities: FsCapabilities;
  readonly #shared: Shared;
  readonly #lane: number | undefined;
  readonly #cancel: Cancellation | undefined;

  constructor(
    readonly session: Session,
    readonly root: string,
    view?: { shared: Shared; lane: number | undefined; cancel: Cancellation | undefined },
  ) {
    this.#shared = view?.shared ?? { rootReady: false, capabilities: capabilitiesOf(session) };
    this.#lane = view?.lane;
    this.#cancel = view?.cancel;
    this.capabilities = this.#shared.capabilities;
  }

  lacks(capability: "atomicReplace" | "hardLink"): string {
    const extension = SFTP_EXTENSIONS[capability === "hardLink" ? "hardlink" : "posixRename"][0];
    return `the SFTP server does not offer ${extension}`;
  }

  classify(error: unknown): FsFailure {
    // OpenSSH reports most errno values (EEXIST, ENOTDIR, ENOTEMPTY) as the generic FAILURE.
    if (hasStatus(error, STATUS.NO_SUCH_FILE)) return "not_found";
    if (hasStatus(error, STATUS.OP_UNSUPPORTED)) return "unsupported";
    return "other";
  }

  /** A dropped or timed-out connection is `unavailable`, whatever the request itself reported. */
  toStorageError(error: unknown, operation: StorageOperation, path: string): StorageError {
    const lost = this.session.lost;
    if (lost !== undefined && !(error instanceof StorageError)) {
      return sshError("unavailable", operation, path, lost.message, error);
    }
    return toStorageError(error, operation, path);
  }

  scope(signal: AbortSignal | undefined, pinned = false): SftpDriver {
    return new SftpDriver(this.session, this.root, {
      shared: this.#shared,
      lane: pinned ? (this.#lane ?? this.session.lane()) : this.#lane,
      cancel: signal === undefined ? this.#cancel : new Cancellation(signal),
    });
  }

  /**
   * Sends clean-up requests even when the operation was cancelled, ignoring their failure; once
   * the operation is cancelled it waits at most `CLEANUP_GRACE_MS` more: a cancelled operation
   * leaves nothing behind on a server that answers, and a server that stopped answering does not
   * hold up the caller that gave up.
   */
  async tidy(step: (io: SftpDriver) => Promise<unknown>): Promise<void> {
    const unbound = new SftpDriver(this.session, this.root, {
      shared: this.#shared,
      lane: this.#lane,
      cancel: undefined,
    });
    const work = step(unbound).then(
      () => undefined,
      () => undefined,
    );
    const cancel = this.#cancel;
    if (cancel === undefined) return work;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let stopWatching: (() => void) | undefined;
    const grace = new Promise<void>((resolve) => {
      // One grace period per operation, from the first clean-up that saw the cancellation.
      const start = () => {
        cancel.cleanUpDeadline ??= Date.now() + CLEANUP_GRACE_MS;
        timer = setTimeout(resolve, Math.max(0, cancel.cleanUpDeadline - Date.now()));
      };
      if (cancel.signal.aborted) start();
      else stopWatching = cancel.watch(start);
    });
    try {
      await Promise.race([work, grace]);
    } finally {
      clearTimeout(timer);
      stopWatching?.();
    }
  }

  onLost(listener: (error: unknown) => void): () => void {
    return this.session.onLost(listener);
  }

  async lstat(path: FsPath): Promise<FsStats | undefined> {
    try {
      // Below a file OpenSSH answers "no such file" (ENOTDIR): missing, as the protocol wants.
      return describe(
        await this.#call<Attributes>((sftp, done) => sftp.lstat(this.#path(path), done)),
      );
    } catch (error) {
      if (hasStatus(error, STATUS.NO_SUCH_FILE)) return undefined;
      throw error;
    }
  }

  /**
   * Reads the directory batch by batch on one channel. ssh2 decodes names as UTF-8, replacing
   * bytes that are not with U+FFFD, so such a name is reported as not UTF-8: no logical path can
   * address it.
   */
  async readdir(path: FsPath, stopAfter: number): Promise<FsDirEntry[] | undefined> {
    const io = this.scope(undefined, true);
    let handle: Buffer;
    try {
      handle = await io.#call<Buffer>((sftp, done) => sftp.opendir(this.#path(path), done));
    } catch (error) {
      if (hasStatus(error, STATUS.NO_SUCH_FILE)) return undefined;
      throw error;
    }
    const entries: FsDirEntry[] = [];
    try {
      while (entries.length <= stopAfter) {
        let batch: FileEntryWithStats[];
        try {
          batch = await io.#call<FileEntryWithStats[]>((sftp, done) =>
            sftp.readdir(handle, done as never),
          );
        } catch (error) {
          if (hasStatus(error, STATUS.EOF)) break;
          throw error;
        }
        if (!Array.isArray(batch) || batch.length === 0) break;
        for (const { filename, attrs } of batch) {
          if (filename === "." || filename === "..") continue;
          const entry: FsDirEntry = { name: filename, stats: describe(attrs) };
          if (filename.includes("\ufffd"))
            entry.nameProblem = "name is not valid UTF-8 (or holds U+FFFD)";
          entries.push(entry);
        }
      }
      return entries;
    } finally {
      await io.tidy((clean) => clean.close(handle));
    }
  }

  /** Creates the root with its missing parents, following symlinks: it is trusted configuration. */
  async makeRoot(): Promise<void> {
    if (this.#shared.rootReady) return;
    const absolute = this.root.startsWith("/");
    const parts = this.root.split("/").filter((part) => part !== "" && part !== ".");
    for (let index = 1; index <= parts.length; index++) {
      const partial = `${absolute ? "/" : ""}${parts.slice(0, index).join("/")}`;
      try {
        await this.#call((sftp, done) => sftp.mkdir(partial, done));
      } catch (error) {
        const attrs = await this.#call<Attributes>((sftp, done) => sftp.stat(partial, done)).catch(
          () => undefined,
        );
        if (attrs === undefined || kindOf(attrs) !== "directory") throw error;
      }
    }
    this.#shared.rootReady = true;
  }

  async mkdir(path: string): Promise<void> {
    await this.#call((sftp, done) => sftp.mkdir(this.#path(path), done));
  }

  async rmdir(path: FsPath): Promise<void> {
    await this.#call((sftp, done) => sftp.rmdir(this.#path(path), done));
  }

  async unlink(path: FsPath): Promise<void> {
    await this.#call((sftp, done) => sftp.unlink(this.#path(path), done));
  }

  createExclusive(path: string): Promise<Buffer> {
    return this.#call<Buffer>((sftp, done) => sftp.open(this.#path(path), "wx", done));
  }

  openRead(path: string): Promise<Buffer> {
    return this.#call<Buffer>((sftp, done) => sftp.open(this.#path(path), "r", done));
  }

  async write(handle: Buffer, bytes: Uint8Array, position: number): Promise<void> {
    await this.#call((sftp, done) =>
      sftp.write(handle, bytes as Buffer, 0, bytes.length, position, done),
    );
  }

  async read(handle: Buffer, into: Uint8Array, position: number): Promise<number> {
    try {
      return await this.#call<number>((sftp, done) =>
        sftp.read(handle, into as Buffer, 0, into.length, position, (error, bytesRead) =>
          done(error, bytesRead),
        ),
      );
    } catch (error) {
      if (hasStatus(error, STATUS.EOF)) return 0;
      throw error;
    }
  }

  async fsync(handle: Buffer): Promise<void> {
    await this.#call((sftp, done) => sftp.ext_openssh_fsync(handle, done));
  }

  async fstat(handle: Buffer): Promise<FsStats> {
    return describe(await this.#call<Attributes>((sftp, done) => sftp.fstat(handle, done)));
  }

  async setMtime(handle: Buffer, stats: FsStats, mtimeMs: number): Promise<FsStats> {
    const mtime = Math.floor(mtimeMs / 1000);
    await this.#call((sftp, done) => sftp.futimes(handle, mtime, mtime, done));
    const version = `${stats.size.toString(16)}-${mtime.toString(16)}`;
    return { ...stats, mtimeMs: mtime * 1000, version, identity: version };
  }

  async close(handle: Buffer): Promise<void> {
    await this.#call((sftp, done) => sftp.close(handle, done));
  }

  async rename(from: string, to: string): Promise<void> {
    await this.#call((sftp, done) =>
      sftp.ext_openssh_rename(this.#path(from), this.#path(to), done),
    );
  }

  async renameNoReplace(from: string, to: string): Promise<void> {
    await this.#call((sftp, done) => sftp.rename(this.#path(from), this.#path(to), done));
  }

  async link(from: string, to: string): Promise<void> {
    await this.#call((sftp, done) =>
      sftp.ext_openssh_hardlink(this.#path(from), this.#path(to), done),
    );
  }

  async symlink(target: string, path: string): Promise<void> {
    // ssh2 puts the two arguments in the order OpenSSH's server expects (it swaps them).
    await this.#call((sftp, done) => sftp.symlink(target, this.#path(path), done));
  }

  readlink(path: string): Promise<string> {
    return this.#call<string>((sftp, done) => sftp.readlink(this.#path(path), done));
  }

  async syncDirectory(): Promise<void> {
    // SFTP has no request for it; `directorySync` is false, so the protocol never asks.
  }

  dispose(): Promise<void> {
    return this.session.close();
  }

  /** Remote path of a logical path or prefix. */
  #path(logical: FsPath): string {
    const text = typeof logical === "string" ? logical : Buffer.from(logical).toString("utf8");
    if (text === "") return this.root;
    return this.root === "/" ? `/${text}` : `${this.root}/${text}`;
  }

  #call<T>(send: (sftp: SFTPWrapper, done: (error: unknown, value?: T) => void) => void) {
    return this.session.request<T>(send, this.#lane, this.#cancel);
  }
}
