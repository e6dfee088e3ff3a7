import type { Readable } from "node:stream";

/**
 * What a stored entry is. Only files and directories are ever read, written or deleted; `walk`
 * also reports symlinks and special files (FIFOs, sockets, devices) so that callers looking for
 * unmanaged content see them, but never follows or touches them.
 */
export type EntryKind = "file" | "directory" | "symlink" | "other";

/** What a backend knows about one logical path. */
export interface StorageEntry {
  /**
   * Logical path relative to the backend root. When the stored name cannot be a logical path
   * (`nameProblem` is set) this is the name shown escaped (`bad\xff`), which always contains a
   * backslash and so can never be passed back to an operation by mistake.
   */
  path: string;
  kind: EntryKind;
  /** Size in bytes; 0 for anything but files. */
  size: number;
  modifiedAt?: Date;
  /**
   * Version token of a file: changes whenever its bytes are replaced. Opaque; compare it only with
   * tokens from the same backend (local: inode, size and mtime; S3: the ETag).
   */
  version?: string;
  /** Content type, from backends that store one (S3, memory). */
  contentType?: string;
  /** `Cache-Control` stored with the file, from backends that store object metadata. */
  cacheControl?: string;
  /** `Content-Disposition` stored with the file, from backends that store object metadata. */
  contentDisposition?: string;
  /** `Content-Encoding` stored with the file, from backends that store object metadata. */
  contentEncoding?: string;
  /** Why the stored name is not a valid logical path (not UTF-8, a control character, ...). */
  nameProblem?: string;
}

/** Bytes of a whole file with the version token they were read at. */
export interface VersionedFile {
  bytes: Uint8Array;
  version: string;
}

/** A file being read (`openVersionedReader`), with the version token of the bytes it reads. */
export interface VersionedReader {
  reader: ByteReader;
  version: string;
}

/** What a completed write produced. */
export interface WriteResult {
  /** Version token of the file now stored at the path. */
  version: string;
}

export interface OperationOptions {
  signal?: AbortSignal;
}

export interface ReadOptions extends OperationOptions {
  /** Fail with `limit_exceeded` instead of reading more than this many bytes. */
  maxBytes?: number;
}

/**
 * Receives a file's bytes one chunk at a time (see `readFileChunks`); returning `false` stops the
 * read. A chunk is valid only during its call.
 */
export type ChunkConsumer = (chunk: Uint8Array) => boolean | undefined;

/**
 * A file read into buffers the caller brings (see `StorageBackend.openReader`). Whoever holds
 * a reader closes it; `writeFile` closes a reader it was given, whatever the outcome.
 */
export interface ByteReader {
  /**
   * Fills `into` with the next bytes of the file, up to its length, and resolves with how many
   * it wrote there: 0 at the end of the file. A fired signal (given to `openReader`) rejects with
   * its reason.
   */
  read(into: Uint8Array): Promise<number>;
  /** Releases the file. Calling it again does nothing. */
  close(): void;
  /**
   * `sha256:<hex>` this reader verifies its bytes against: its final read (the one that would
   * resolve with 0) rejects unless every byte it returned has this digest, and so does every
   * read after that. Set it only on a reader that checks; a backend that must check a payload
   * against `WriteOptions.sha256` leaves the hashing to a reader verifying the same digest (S3).
   */
  readonly verifiesSha256?: string;
}

/**
 * Bytes to write: a buffer, a string (UTF-8), a stream of chunks, or a `ByteReader`, which a
 * backend reads into buffers of its own choosing (the local backend: one reused buffer).
 */
export type WriteData = Uint8Array | string | Readable | AsyncIterable<Uint8Array> | ByteReader;

export interface WriteOptions extends OperationOptions {
  /**
   * Replace an existing file. When false (the default) the write is a no-clobber create: an
   * existing file fails with `already_exists`, atomically, even against a concurrent writer.
   */
  overwrite?: boolean;
  /**
   * Compare-and-swap: replace the file only while its version token is still this one. A missing
   * file or another version fails with `conflict` and leaves the stored bytes alone. Implies
   * `overwrite`.
   */
  ifMatch?: string;
  /** Content type recorded by backends that store one (S3); inferred from the extension otherwise. */
  contentType?: string;
  /**
   * `Cache-Control`, `Content-Disposition` and `Content-Encoding` stored with the file. Only
   * backends with `storesObjectMetadata` accept them; the others refuse the write with
   * `unsupported` before any IO, so that a file is never published without the headers asked for.
   * The payload is stored as given: a `Content-Encoding` describes bytes the caller encoded.
   */
  cacheControl?: string;
  contentDisposition?: string;
  contentEncoding?: string;
  /** Expected byte count of the payload (lets S3 choose a single PUT or a multipart upload). */
  size?: number;
  /** Expected `sha256:<hex>` of the payload, for backends that can have the server verify it. */
  sha256?: string;
  /**
   * The write commits what earlier writes stored (a caller's state or journal file). Local and
   * SFTP flush it, and first the directories earlier writes moved names into, even when the
   * store runs without `fsync`. S3 stores it in one conditional PUT whatever its size, since a
   * multipart completion does not enforce conditions everywhere; a payload larger than one PUT
   * may hold (5 GiB) fails with `limit_exceeded`.
   */
  commit?: boolean;
}

export interface WalkOptions extends OperationOptions {
  /** Descend into sub-directories (default false: direct children only). */
  recursive?: boolean;
  /** Maximum number of entries; a walk that would return more fails with `limit_exceeded`. */
  limit: number;
  /**
   * The caller reads only `path`, `kind`, `size` and `nameProblem`: a backend may leave the other
   * fields out (the local and SFTP backends do, which spares a date and a version token per file
   * of a million-file source).
   */
  bare?: boolean;
}

export interface DeleteOptions extends OperationOptions {
  /** Treat a missing target as already deleted. */
  ignoreMissing?: boolean;
  /** Remove directories left empty by the delete, up to but never including the backend root. */
  pruneEmptyDirs?: boolean;
  /**
   * `deletePrefix` only: paths relative to the prefix that survive, with the directories above
   * them. Everything else below the prefix goes, whatever its kind or name.
   */
  keep?: readonly string[];
  /**
   * `deletePaths` only: path, as passed (relative to the prefix), to the version token the caller
   * last saw there. Such a path is deleted only while its stored version is still that one, checked at the moment of the delete (local and SFTP: under the
   * target's swap lock; S3: `If-Match` on the DELETE; memory: in one step). A path stored at
   * another version is left in place and, once every other target is deleted, the call fails with
   * `conflict` naming it. A missing path counts as deleted under `ignoreMissing`.
   */
  ifMatch?: ReadonlyMap<string, string>;
  /**
   * `deletePaths` only: the delete commits what earlier writes and deletes did (a lease's
   * release, a state's removal). Local and SFTP flush first the directories those changed names
   * in (with `fsync`), then, in both modes, the directories of the deleted names. Other backends
   * keep nothing unflushed.
   */
  commit?: boolean;
}

/**
 * Symbolic and hard links, on stores that have both an atomic rename over a name and hard links
 * (local directories; SFTP servers offering `posix-rename@openssh.com` and
 * `hardlink@openssh.com`): what a release layout is built from. Stores lacking either offer none.
 * Paths are logical; a link's text is a relative logical path. The other operations still refuse
 * every symlink below the root.
 */
export interface LinkOperations {
  /** The text of the symlink at `path`; undefined when nothing is there. Another kind fails `conflict`. */
  readLink(path: string, options?: OperationOptions): Promise<string | undefined>;
  /**
   * Points the symlink at `path` to `target` in one atomic step (a new link under a temp name,
   * renamed over the old one), then flushes its directory where the store can, whatever the
   * fsync mode. A file or directory at `path` fails `conflict`.
   */
  switchLink(path: string, target: string, options?: OperationOptions): Promise<void>;
  /**
   * Gives the file at `from` the second name `to`, making `to`'s missing parent directories. An
   * existing `to` fails `already_exists`; a store without hard links fails `unsupported`.
   */
  hardLink(from: string, to: string, options?: OperationOptions): Promise<void>;
  /**
   * Optional: makes `to` a clone of the file at `from` — its own file (its own inode and version)
   * sharing the data blocks until either is written, so that writing into one never changes the
   * other (a reflink: local directories on XFS or btrfs). Making missing parents and refusing an
   * existing `to` as `hardLink` does; a store or filesystem without clones fails `unsupported`,
   * which a caller takes as the answer for the whole store.
   */
  cloneFile?(from: string, to: string, options?: OperationOptions): Promise<void>;
}

/**
 * A place distributor reads bundles from or publishes to. Every path is logical (see `paths.ts`);
 * invalid paths fail with `invalid_path` before any IO. Every failure is a `StorageError`.
 */
export interface StorageBackend {
  /** Backend type, e.g. `local`, `memory`, `s3`, `ssh`. */
  readonly name: string;
  /** Human description of the root, e.g. `local:/srv/reports`. */
  readonly location: string;
  /**
   * How many writes an engine should keep in flight against this backend: enough to overlap its
   * waits (fsyncs, round trips). Absent: the engine's own default.
   */
  readonly writeConcurrency?: number;
  /**
   * True when two writes of one path can share a version token: S3 ETags derive from the bytes
   * alone, SFTP's size and whole-second mtime can coincide. A version then proves a file
   * unchanged, not who wrote it.
   */
  readonly versionsMayRepeat?: boolean;
  /**
   * True when the backend stores `Cache-Control`, `Content-Type`, `Content-Disposition` and
   * `Content-Encoding` with each file and reports them from `stat` (S3, memory). Local
   * directories and SFTP servers cannot.
   */
  readonly storesObjectMetadata?: boolean;
  /**
   * The longest logical path (UTF-8 bytes) the store can hold below this backend's root: S3's
   * 1 024-byte keys less the prefix, a filesystem's 4 095-byte paths less the root. Longer paths
   * are refused `invalid_path` before any IO, and planners refuse them before writing anything.
   * Absent: no limit beyond the 255-byte segments every logical path keeps.
   */
  readonly maxPathBytes?: number;
  /** Optional: links, where the store has them (see `LinkOperations`). */
  readonly links?: LinkOperations;

  readFile(path: string, options?: ReadOptions): Promise<Uint8Array>;
  /** Reads a whole file together with the version token of exactly those bytes. */
  readVersioned(path: string, options?: ReadOptions): Promise<VersionedFile>;
  /**
   * Optional: `readVersioned` as a reader, so that a big file (a million-output state) is read a
   * chunk at a time instead of held whole. Its reads fail `limit_exceeded` past `maxBytes`, as
   * `readVersioned` does; the version is that of exactly the bytes read. Backends without it are
   * read with `readVersioned`.
   */
  readonly openVersionedReader?: (path: string, options?: ReadOptions) => Promise<VersionedReader>;
  openRead(path: string, options?: OperationOptions): Promise<Readable>;
  /**
   * Optional: opens a file for reads into buffers the caller provides: no stream and no buffer
   * per chunk, for consumers that handle bytes in place (hashing, a local copy). Missing files
   * and symlinks fail here, as with `openRead`. `readFileChunks` and every `writeFile` also work
   * with backends that lack it.
   */
  openReader?(path: string, options?: OperationOptions): Promise<ByteReader>;
  /** Writes atomically: readers see the old bytes or the new bytes, never a partial file. */
  writeFile(path: string, data: WriteData, options?: WriteOptions): Promise<WriteResult>;
  stat(path: string, options?: OperationOptions): Promise<StorageEntry>;
  /**
   * Entries below `prefix` (excluding the prefix itself), sorted by path in byte order. Every kind
   * is listed, including symlinks, special files and names that are not logical paths; walks never
   * descend into those.
   */
  walk(prefix: string, options: WalkOptions): Promise<StorageEntry[]>;
  /** True when anything exists below `prefix`. */
  hasAny(prefix: string, options?: OperationOptions): Promise<boolean>;
  /**
   * Deletes the files `prefix/<path>` for each of `paths` and nothing else, in batches where the
   * store allows, in the order given (a file that describes the others, such as a state file, is
   * listed last by callers that delete it). Every target is checked before any is deleted: a
   * directory or special file fails `unsupported`, a missing one `not_found` unless
   * `ignoreMissing`. `ifMatch` fences paths by version.
   */
  deletePaths(prefix: string, paths: readonly string[], options?: DeleteOptions): Promise<void>;
  /**
   * Deletes `prefix` and everything below it, never its parent or siblings (`bundle` leaves
   * `bundle-sibling/` alone). For `""` it empties the backend root but keeps the root itself.
   * A missing prefix fails with `not_found` unless `ignoreMissing`. With `keep`, the kept paths
   * (and the prefix itself) stay.
   */
  deletePrefix(prefix: string, options?: DeleteOptions): Promise<void>;
  /**
   * Optional: aborts unfinished multipart uploads of exactly these paths (S3), so that recovery
   * of a killed upload leaves no hidden parts behind. Resolves with how many were aborted.
   */
  abortUploads?(paths: readonly string[], options?: OperationOptions): Promise<number>;
  /** Releases connections and handles; every later call fails with `unavailable`. */
  close(): Promise<void>;
}
