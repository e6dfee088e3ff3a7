import type { Readable } from "node:stream";
import type {
  ByteReader,
  DeleteOptions,
  LinkOperations,
  OperationOptions,
  ReadOptions,
  StorageBackend,
  StorageEntry,
  VersionedFile,
  VersionedReader,
  WalkOptions,
  WriteData,
  WriteOptions,
  WriteResult,
} from "../backend.js";
import { StorageError, type StorageOperation } from "../errors.js";
import { joinEach, validatePath, validatePrefix } from "../paths.js";
import { abortable } from "./abort.js";
import { backendErrors } from "./backend-error.js";
import { checkCount } from "./limits.js";
import { holdSourceErrors, isByteReader, releaseSource } from "./write-source.js";

export type WriteOperation = "write file" | "write stream";

/**
 * The storage-specific half of a backend. The frame calls these only with valid paths and bounds,
 * on an open backend, with a signal that had not fired yet.
 */
export interface BackendOperations {
  readFile(path: string, options: ReadOptions): Promise<Uint8Array>;
  readVersioned(path: string, options: ReadOptions): Promise<VersionedFile>;
  openRead(path: string, options: OperationOptions): Promise<Readable>;
  /** Optional (see `StorageBackend.openReader`); the reader's reads map their own errors. */
  openReader?(path: string, options: OperationOptions): Promise<ByteReader>;
  /** Optional (see `StorageBackend.openVersionedReader`); the reads map their own errors. */
  openVersionedReader?(path: string, options: ReadOptions): Promise<VersionedReader>;
  /**
   * Stores `data` atomically. `overwrite: false` must be a no-clobber create that a concurrent
   * writer cannot race; `ifMatch` a replace of exactly that version (else `conflict`).
   */
  writeFile(
    path: string,
    data: WriteData,
    operation: WriteOperation,
    options: WriteOptions,
  ): Promise<WriteResult>;
  stat(path: string, options: OperationOptions): Promise<StorageEntry>;
  walk(prefix: string, options: WalkOptions): Promise<StorageEntry[]>;
  hasAny(prefix: string, options: OperationOptions): Promise<boolean>;
  /**
   * `targets` are full logical paths, distinct; every one is checked before any is deleted.
   * `options.ifMatch`, when set, is keyed by full logical path (the frame maps it).
   */
  deletePaths(
    operation: StorageOperation,
    targets: readonly string[],
    options: DeleteOptions,
  ): Promise<void>;
  deletePrefix(prefix: string, options: DeleteOptions): Promise<void>;
  /** Optional (see `StorageBackend.links`); paths and link texts are valid logical paths. */
  links?: LinkOperations;
  /** Optional (see `StorageBackend.abortUploads`); paths are valid logical paths. */
  abortUploads?(paths: readonly string[], options: OperationOptions): Promise<number>;
  /** Releases connections; called once, after which the frame refuses every operation. */
  close?(): Promise<void>;
}

export interface BackendIdentity {
  name: string;
  location: string;
  /** See `StorageBackend.writeConcurrency`. */
  writeConcurrency?: number;
  /** See `StorageBackend.versionsMayRepeat`. */
  versionsMayRepeat?: boolean;
  /** See `StorageBackend.storesObjectMetadata`. */
  storesObjectMetadata?: boolean;
  /** See `StorageBackend.maxPathBytes`. */
  maxPathBytes?: number;
  /** Turns a failure that is not a cancellation into a `StorageError` (e.g. errno mapping). */
  mapError?: (error: unknown, operation: StorageOperation, path: string) => unknown;
}

/**
 * Wraps a backend's operations in the parts of the contract that do not depend on where bytes
 * live: invalid paths and malformed bounds fail before any IO, a closed backend is `unavailable`,
 * a cancelled call rejects with the signal's reason, and a write owns its source stream.
 */
export function frameBackend(
  identity: BackendIdentity,
  operations: BackendOperations,
): StorageBackend {
  return new FramedBackend(identity, operations);
}

class FramedBackend implements StorageBackend {
  readonly name: string;
  readonly location: string;
  readonly writeConcurrency?: number;
  readonly versionsMayRepeat?: boolean;
  readonly storesObjectMetadata?: boolean;
  readonly maxPathBytes?: number;
  readonly openReader?: (path: string, options?: OperationOptions) => Promise<ByteReader>;
  readonly openVersionedReader?: (path: string, options?: ReadOptions) => Promise<VersionedReader>;
  readonly abortUploads?: (paths: readonly string[], options?: OperationOptions) => Promise<number>;
  readonly links?: LinkOperations;
  readonly #operations: BackendOperations;
  readonly #mapError: (error: unknown, operation: StorageOperation, path: string) => unknown;
  #closed = false;

  /** A valid logical path the store can hold: refused before any IO otherwise. */
  #valid(path: string, operation: StorageOperation): string {
    validatePath(path, operation, this.name);
    const limit = this.maxPathBytes;
    if (limit !== undefined && path.length > limit / 3 && Buffer.byteLength(path) > limit) {
      throw new StorageError({
        kind: "invalid_path",
        operation,
        backend: this.name,
        path,
        detail: `path is ${Buffer.byteLength(path)} bytes, more than the ${limit} this store can hold below ${this.location}`,
      });
    }
    return path;
  }

  constructor(identity: BackendIdentity, operations: BackendOperations) {
    this.name = identity.name;
    this.location = identity.location;
    if (identity.writeConcurrency !== undefined) this.writeConcurrency = identity.writeConcurrency;
    if (identity.versionsMayRepeat) this.versionsMayRepeat = true;
    if (identity.storesObjectMetadata) this.storesObjectMetadata = true;
    if (identity.maxPathBytes !== undefined) this.maxPathBytes = identity.maxPathBytes;
    this.#operations = operations;
    this.#mapError = identity.mapError ?? ((error) => error);
    const openReader = operations.openReader?.bind(operations);
    if (openReader !== undefined) {
      this.openReader = async (path, options = {}) => {
        this.#valid(path, "open reader");
        return this.#run("open reader", path, options.signal, () => openReader(path, options));
      };
    }
    const openVersioned = operations.openVersionedReader?.bind(operations);
    if (openVersioned !== undefined) {
      this.openVersionedReader = async (path, options = {}) => {
        this.#valid(path, "read file");
        checkCount("maxBytes", options.maxBytes);
        return this.#run("read file", path, options.signal, () => openVersioned(path, options));
      };
    }
    const links = operations.links;
    if (links !== undefined) this.links = this.#frameLinks(links);
    const abortUploads = operations.abortUploads?.bind(operations);
    if (abortUploads !== undefined) {
      this.abortUploads = async (paths, options = {}) => {
        for (const path of paths) this.#valid(path, "abort uploads");
        const first = paths[0] ?? "";
        return this.#run("abort uploads", first, options.signal, () =>
          abortUploads([...new Set(paths)], options),
        );
      };
    }
  }

  async readFile(path: string, options: ReadOptions = {}): Promise<Uint8Array> {
    this.#valid(path, "read file");
    checkCount("maxBytes", options.maxBytes);
    return this.#run("read file", path, options.signal, () =>
      this.#operations.readFile(path, options),
    );
  }

  async readVersioned(path: string, options: ReadOptions = {}): Promise<VersionedFile> {
    this.#valid(path, "read file");
    checkCount("maxBytes", options.maxBytes);
    return this.#run("read file", path, options.signal, () =>
      this.#operations.readVersioned(path, options),
    );
  }

  async openRead(path: string, options: OperationOptions = {}): Promise<Readable> {
    this.#valid(path, "open reader");
    return this.#run("open reader", path, options.signal, () =>
      this.#operations.openRead(path, options),
    );
  }

  async writeFile(path: string, data: WriteData, options: WriteOptions = {}): Promise<WriteResult> {
    holdSourceErrors(data);
    const operation =
      typeof data === "string" || data instanceof Uint8Array ? "write file" : "write stream";
    try {
      this.#valid(path, operation);
      if (options.ifMatch !== undefined && options.ifMatch === "") {
        throw backendErrors(this.name)("conflict", operation, path, "ifMatch is an empty version");
      }
      checkCount("size", options.size);
      if (!this.storesObjectMetadata) {
        const asked = metadataAsked(options);
        if (asked !== undefined) {
          throw backendErrors(this.name)(
            "unsupported",
            operation,
            path,
            `cannot store object metadata (${asked}); only backends that store it per file, such as s3, can`,
          );
        }
      }
      return await this.#run(operation, path, options.signal, () =>
        this.#operations.writeFile(path, data, operation, options),
      );
    } catch (error) {
      releaseSource(data);
      throw error;
    } finally {
      // A reader is closed whatever happened; the backend may have closed it already.
      if (isByteReader(data)) data.close();
    }
  }

  async stat(path: string, options: OperationOptions = {}): Promise<StorageEntry> {
    this.#valid(path, "stat");
    return this.#run("stat", path, options.signal, () => this.#operations.stat(path, options));
  }

  async walk(prefix: string, options: WalkOptions): Promise<StorageEntry[]> {
    validatePrefix(prefix, "walk", this.name);
    checkCount("limit", options.limit, true);
    return this.#run("walk", prefix, options.signal, () => this.#operations.walk(prefix, options));
  }

  async hasAny(prefix: string, options: OperationOptions = {}): Promise<boolean> {
    validatePrefix(prefix, "has any", this.name);
    return this.#run("has any", prefix, options.signal, () =>
      this.#operations.hasAny(prefix, options),
    );
  }

  async deletePaths(
    prefix: string,
    paths: readonly string[],
    options: DeleteOptions = {},
  ): Promise<void> {
    const operation = "delete managed outputs";
    const targets = this.#deleteTargets(operation, prefix, paths);
    const mapped = this.#fencedOptions(operation, prefix, options);
    return this.#run(operation, prefix, options.signal, () =>
      this.#operations.deletePaths(operation, targets, mapped),
    );
  }

  async deletePrefix(prefix: string, options: DeleteOptions = {}): Promise<void> {
    validatePrefix(prefix, "delete prefix", this.name);
    for (const kept of options.keep ?? []) this.#valid(kept, "delete prefix");
    return this.#run("delete prefix", prefix, options.signal, () =>
      this.#operations.deletePrefix(prefix, options),
    );
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const close = this.#operations.close?.bind(this.#operations);
    if (close === undefined) return;
    try {
      await close();
    } catch (error) {
      throw this.#mapError(error, "close", "");
    }
  }

  /** `ifMatch` re-keyed from relative paths to the full logical paths the operations receive. */
  #fencedOptions(
    operation: StorageOperation,
    prefix: string,
    options: DeleteOptions,
  ): DeleteOptions {
    if (options.ifMatch === undefined) return options;
    const ifMatch = new Map<string, string>();
    for (const [path, version] of options.ifMatch) {
      this.#valid(path, operation);
      if (version === "") {
        throw backendErrors(this.name)("conflict", operation, path, "ifMatch is an empty version");
      }
      ifMatch.set(joinEach(prefix, [path])[0] as string, version);
    }
    return { ...options, ifMatch };
  }

  /** Validated here, with this operation and backend, so a bad path names the call. */
  #deleteTargets(operation: StorageOperation, prefix: string, paths: readonly string[]): string[] {
    validatePrefix(prefix, operation, this.name);
    for (const path of paths) this.#valid(path, operation);
    return [...new Set(joinEach(prefix, paths))];
  }

  #frameLinks(links: LinkOperations): LinkOperations {
    return {
      readLink: async (path, options = {}) => {
        this.#valid(path, "read link");
        return this.#run("read link", path, options.signal, () => links.readLink(path, options));
      },
      switchLink: async (path, target, options = {}) => {
        this.#valid(path, "switch link");
        validatePath(target, "switch link", this.name);
        return this.#run("switch link", path, options.signal, () =>
          links.switchLink(path, target, options),
        );
      },
      hardLink: async (from, to, options = {}) => {
        this.#valid(from, "hard link");
        this.#valid(to, "hard link");
        return this.#run("hard link", to, options.signal, () => links.hardLink(from, to, options));
      },
      ...(links.cloneFile === undefined
        ? {}
        : {
            cloneFile: async (from: string, to: string, options: OperationOptions = {}) => {
              this.#valid(from, "clone file");
              this.#valid(to, "clone file");
              const clone = links.cloneFile?.bind(links);
              return this.#run("clone file", to, options.signal, async () =>
                clone?.(from, to, options),
              );
            },
          }),
    };
  }

  async #run<T>(
    operation: StorageOperation,
    path: string,
    signal: AbortSignal | undefined,
    body: () => Promise<T>,
  ): Promise<T> {
    if (this.#closed) {
      throw backendErrors(this.name)("unavailable", operation, path, "backend is closed");
    }
    return abortable(signal, body, (error) => this.#mapError(error, operation, path));
  }
}

/** The object metadata headers a write asks for, named for a message; undefined when none. */
function metadataAsked(options: WriteOptions): string | undefined {
  const asked = [
    options.cacheControl === undefined ? undefined : "Cache-Control",
    options.contentDisposition === undefined ? undefined : "Content-Disposition",
    options.contentEncoding === undefined ? undefined : "Content-Encoding",
  ].filter((name) => name !== undefined);
  return asked.length === 0 ? undefined : asked.join(", ");
}
