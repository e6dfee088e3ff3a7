import type { StorageError, StorageOperation } from "../errors.js";

/**
 * The IO a filesystem-like store offers (a local directory, an SFTP server): what the write
 * protocol of `FsStore` is built from. A driver does IO and nothing else: no path checks, no
 * temp names, no locks, no bookkeeping. Paths are logical paths below the driver's root (`""`
 * is the root itself); see `FsPath` for the names a listing returns.
 */

/** What lies at a name, never following a symlink. */
export type FsKind = "file" | "directory" | "symlink" | "other";

/** What an lstat or fstat tells. */
export interface FsStats {
  kind: FsKind;
  /** Bytes; meaningful for files. */
  size: number;
  /** Last modification, milliseconds since the epoch, at the store's precision. */
  mtimeMs: number;
  /**
   * The version token of a file (`StorageEntry.version`): changes whenever the file is replaced.
   * Drivers derive it from what they see (local: inode, size and mtime; SFTP: size and mtime).
   */
  version: string;
  /**
   * What tells this very file from another that took its name (local: device and inode as well
   * as the version). A swap lock is broken only while it is still the file judged stale.
   */
  identity: string;
}

/**
 * A path as a driver receives it: a logical path, or raw bytes for a name a listing returned that
 * is not UTF-8 (and the paths below it): such names can still be removed, never written.
 */
export type FsPath = string | Uint8Array;

/** One entry of a directory listing (never `.` or `..`). */
export interface FsDirEntry {
  /** The name as stored: a string when it is valid UTF-8, else its bytes. */
  name: string | Uint8Array;
  /** Set by a driver that sees names only decoded, when the decoding lost bytes. */
  nameProblem?: string;
  stats: FsStats;
}

/** How the protocol reads a driver's failures. */
export type FsFailure = "not_found" | "exists" | "not_directory" | "unsupported" | "other";

/**
 * What a store can and cannot do. Each lacking capability is handled once, by the protocol: with
 * a clear `unsupported` error or the fallback documented beside it.
 */
export interface FsCapabilities {
  /**
   * `rename` replaces an existing target atomically. Without it every overwrite and
   * compare-and-swap fails `unsupported` before anything is written (`lacks("atomicReplace")`).
   */
  atomicReplace: boolean;
  /**
   * `link` makes a second name that fails when the target exists. Without it a no-clobber create
   * moves the temp file with `renameNoReplace`, which must refuse an existing target too.
   */
  hardLink: boolean;
  /**
   * `renameNoReplace` is one request that the store carries out whole: the target appears and
   * the source name goes at once, or neither. A no-clobber create then moves its temp file with
   * it instead of a link and an unlink, so no cut between two requests can leave the temp name
   * behind a target that landed (docs/decisions.md, "A commit file's temp name").
   */
  atomicMoveNoClobber: boolean;
  /** `fsync` of an open file reaches the disk. Without it files are not flushed (a no-op). */
  fileSync: boolean;
  /**
   * `syncDirectory` flushes a directory's entries. With it, a `commit` write (state, lease) lands
   * only after the names it will describe are durable; without it nothing is flushed.
   */
  directorySync: boolean;
  /**
   * Two replacements of one path within one mtime tick, of one size, would share a version
   * token: the protocol then moves each replacement's mtime past the one it replaces.
   */
  coarseMtime: boolean;
  /**
   * Requests sent without waiting are carried out in the order sent (one SFTP channel): a close
   * may follow a flush, an unlink a link, in the same round trip. Otherwise each waits.
   */
  orderedRequests: boolean;
  /**
   * Directories once seen to be real directories are remembered for the store's lifetime (each
   * lstat is a round trip). Otherwise every component is checked on every call.
   */
  rememberDirectories: boolean;
  /**
   * mtimes are on this host's clock, so a swap lock older than `staleSwapLockMs` is stale at
   * first sight. Otherwise it must be seen unchanged for that long.
   */
  localClock: boolean;
  /** How long a swap lock may stay before it counts as left by a dead writer. */
  staleSwapLockMs: number;
  /** Largest payload of one `write`. */
  writeBlockBytes: number;
  /** Bytes asked for by one `read` of a whole-file read or a stream. */
  readBlockBytes: number;
  /** `write`s one file keeps outstanding (1: each awaited before the next chunk is taken). */
  writesInFlight: number;
  /** `read`s one file keeps outstanding. */
  readsInFlight: number;
  /** Checks, deletes or listings one operation keeps in flight. */
  parallelism: number;
}

/** An IO primitive set; see the module comment. Every method may reject with the store's own errors. */
export interface FsDriver<Handle = unknown> {
  /** Backend name used in error messages (`local`, `ssh`). */
  readonly name: string;
  readonly capabilities: FsCapabilities;
  /** What the store lacks, in words: `the SFTP server does not offer posix-rename@openssh.com`. */
  lacks(capability: "atomicReplace" | "hardLink"): string;
  /** Sorts a failure of this driver into what the protocol must tell apart. */
  classify(error: unknown): FsFailure;
  /**
   * Maps a failure of this driver to a `StorageError` naming the operation and path; a
   * `StorageError` passes through unchanged. The backend's frame uses it for every failure.
   */
  toStorageError(error: unknown, operation: StorageOperation, path: string): StorageError;

  /**
   * The same store for one operation: requests honour `signal` (reject with its reason once it
   * fires), and with `pinned` they stay on one channel, as handles need.
   */
  scope(signal: AbortSignal | undefined, pinned?: boolean): FsDriver<Handle>;
  /**
   * Runs clean-up that must happen even after a cancellation (closing a handle, removing a temp
   * file or a lock), ignoring its failure. A driver may stop waiting for it after a grace period.
   */
  tidy(step: (io: FsDriver<Handle>) => Promise<unknown>): Promise<void>;
  /** Optional: calls `listener` once the store can serve no further request (a lost connection). */
  onLost?(listener: (error: unknown) => void): () => void;

  /** Undefined when the path does not exist (or a parent is not a directory). */
  lstat(path: FsPath): Promise<FsStats | undefined>;
  /**
   * The entries of a directory, undefined when it does not exist. A driver may stop reading
   * once it has more than `stopAfter` entries.
   */
  readdir(path: FsPath, stopAfter: number): Promise<FsDirEntry[] | undefined>;
  /** Creates the root, with its parents, when it does not exist yet. */
  makeRoot(): Promise<void>;
  /** Creates one directory; fails when the name exists. */
  mkdir(path: string): Promise<void>;
  rmdir(path: FsPath): Promise<void>;
  unlink(path: FsPath): Promise<void>;

  /** Opens a new file for writing; fails when the name exists (O_CREAT|O_EXCL). */
  createExclusive(path: string): Promise<Handle>;
  /** Opens an existing regular file for reading, never following a final symlink where the store can. */
  openRead(path: string): Promise<Handle>;
  write(handle: Handle, bytes: Uint8Array, position: number): Promise<void>;
  /** Reads into `into` at `position`; 0 at the end of the file. */
  read(handle: Handle, into: Uint8Array, position: number): Promise<number>;
  fsync(handle: Handle): Promise<void>;
  fstat(handle: Handle): Promise<FsStats>;
  /**
   * Sets the open file's mtime (only needed with `coarseMtime`) and returns `stats` (its fstat)
   * as they are now.
   */
  setMtime(handle: Handle, stats: FsStats, mtimeMs: number): Promise<FsStats>;
  close(handle: Handle): Promise<void>;

  /** Moves `from` onto `to`, atomically replacing an existing `to` (needs `atomicReplace`). */
  rename(from: string, to: string): Promise<void>;
  /** Moves `from` to `to`, failing when `to` exists (the fallback without `hardLink`). */
  renameNoReplace(from: string, to: string): Promise<void>;
  /** Gives the file at `from` the second name `to`, failing when `to` exists. */
  link(from: string, to: string): Promise<void>;
  /**
   * Optional: makes `to` a clone of the file at `from` — a new file sharing its data blocks
   * until either is written (a reflink: FICLONE on XFS and btrfs) — failing when `to` exists,
   * and failing `unsupported` (see `classify`) where the filesystem cannot clone.
   */
  clone?(from: string, to: string): Promise<void>;
  /** Makes a symbolic link at `path` whose text is `target`; fails when the name exists. */
  symlink(target: string, path: string): Promise<void>;
  /** The text of the symbolic link at `path`. */
  readlink(path: string): Promise<string>;
  /** Flushes a directory's entries (needs `directorySync`); a missing directory is no error. */
  syncDirectory(path: string): Promise<void>;
  /** Optional: releases connections; called once, when the backend closes. */
  dispose?(): Promise<void>;
}
