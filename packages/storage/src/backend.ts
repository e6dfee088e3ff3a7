import type { Readable } from "node:stream";

export type EntryKind = "file" | "directory";

/** What a backend knows about one logical path. */
export interface StorageEntry {
  /** Logical path relative to the backend root. */
  path: string;
  kind: EntryKind;
  /** Size in bytes; 0 for directories. */
  size: number;
  modifiedAt?: Date;
}

export interface OperationOptions {
  signal?: AbortSignal;
}

export interface ReadOptions extends OperationOptions {
  /** Fail with `limit_exceeded` instead of reading more than this many bytes. */
  maxBytes?: number;
}

/** Bytes to write: a buffer, a string (UTF-8), or a stream of chunks. */
export type WriteData = Uint8Array | string | Readable | AsyncIterable<Uint8Array>;

export interface WriteOptions extends OperationOptions {
  /** Replace an existing file. When false (the default) an existing file fails with `already_exists`. */
  overwrite?: boolean;
  /** Content type recorded by backends that store one (S3); inferred from the extension otherwise. */
  contentType?: string;
}

export interface WalkOptions extends OperationOptions {
  /** Descend into sub-directories (default false: direct children only). */
  recursive?: boolean;
  /** Maximum number of entries; a walk that would return more fails with `limit_exceeded`. */
  limit: number;
}

export interface DeleteOptions extends OperationOptions {
  /** Treat a missing target as already deleted. */
  ignoreMissing?: boolean;
  /** Remove directories left empty by the delete, up to but never including the backend root. */
  pruneEmptyDirs?: boolean;
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

  readFile(path: string, options?: ReadOptions): Promise<Uint8Array>;
  openRead(path: string, options?: OperationOptions): Promise<Readable>;
  /** Writes atomically: readers see the old bytes or the new bytes, never a partial file. */
  writeFile(path: string, data: WriteData, options?: WriteOptions): Promise<void>;
  stat(path: string, options?: OperationOptions): Promise<StorageEntry>;
  /** Entries below `prefix` (excluding the prefix itself), sorted by path in byte order. */
  walk(prefix: string, options: WalkOptions): Promise<StorageEntry[]>;
  /** True when anything exists below `prefix`. */
  hasAny(prefix: string, options?: OperationOptions): Promise<boolean>;
  /** Deletes the given outputs of a bundle path (never its state file). */
  deleteManagedOutputs(
    bundlePath: string,
    outputPaths: readonly string[],
    options?: DeleteOptions,
  ): Promise<void>;
  /** Deletes the given outputs of a bundle path and its `.distributor.json`. */
  deleteManagedBundle(
    bundlePath: string,
    outputPaths: readonly string[],
    options?: DeleteOptions,
  ): Promise<void>;
  /**
   * Deletes `prefix` and everything below it, never its parent or siblings (`bundle` leaves
   * `bundle-sibling/` alone). For `""` it empties the backend root but keeps the root itself.
   * A missing prefix fails with `not_found` unless `ignoreMissing`.
   */
  deletePrefix(prefix: string, options?: DeleteOptions): Promise<void>;
  close(): Promise<void>;
}
