import type { Readable } from "node:stream";
import { throwIfAborted } from "../adapter/abort.js";
import type { BackendOperations, WriteOperation } from "../adapter/backend-frame.js";
import type {
  ByteReader,
  DeleteOptions,
  LinkOperations,
  OperationOptions,
  ReadOptions,
  StorageEntry,
  VersionedFile,
  VersionedReader,
  WalkOptions,
  WriteData,
  WriteOptions,
  WriteResult,
} from "../backend.js";
import { mapBounded } from "../concurrency.js";
import { isStorageError, type StorageError, type StorageOperation } from "../errors.js";
import { cloneFileInStore, hardLinkFile, readSymlink, switchSymlink } from "./links.js";
import { openReadStream, readWholeFile } from "./read.js";
import { emptyDirectory, pruneEmptyParents, removeTree, unlinkIfMatch } from "./remove.js";
import { type FsStore, splitPath } from "./store.js";
import { walkTree } from "./walk.js";
import { flushDirectories, writeAtomically } from "./write.js";

/**
 * Reads a driver serves faster itself (the local one reads synchronously into the caller's
 * buffers); each replaces the protocol's own, which works on every driver.
 */
export interface FsReadOverrides {
  readVersioned?(path: string, options: ReadOptions): Promise<VersionedFile>;
  openRead?(path: string, options: OperationOptions): Promise<Readable>;
  openReader?(path: string, options: OperationOptions): Promise<ByteReader>;
  openVersionedReader?(path: string, options: ReadOptions): Promise<VersionedReader>;
}

/**
 * The operations of a backend over a filesystem-like store: give them to `frameBackend` with the
 * backend's identity (`mapError` from the driver's `toStorageError`).
 */
export function fsOperations<Handle>(
  store: FsStore<Handle>,
  reads: FsReadOverrides = {},
): BackendOperations {
  return new FsOperations(store, reads);
}

class FsOperations<Handle> implements BackendOperations {
  readonly openReader?: (path: string, options: OperationOptions) => Promise<ByteReader>;
  readonly openVersionedReader?: (path: string, options: ReadOptions) => Promise<VersionedReader>;
  /** Only where the store can both rename over a name and make hard links: see `LinkOperations`. */
  readonly links?: LinkOperations;

  constructor(
    readonly store: FsStore<Handle>,
    readonly reads: FsReadOverrides,
  ) {
    if (reads.openReader !== undefined) this.openReader = reads.openReader.bind(reads);
    if (reads.openVersionedReader !== undefined) {
      this.openVersionedReader = reads.openVersionedReader.bind(reads);
    }
    const { atomicReplace, hardLink } = store.driver.capabilities;
    if (atomicReplace && hardLink) {
      this.links = {
        readLink: (path, options = {}) => readSymlink(store, path, options),
        switchLink: (path, target, options = {}) => switchSymlink(store, path, target, options),
        hardLink: (from, to, options = {}) => hardLinkFile(store, from, to, options),
        ...(store.driver.clone === undefined
          ? {}
          : {
              cloneFile: (from: string, to: string, options: OperationOptions = {}) =>
                cloneFileInStore(store, from, to, options),
            }),
      };
    }
  }

  async readFile(path: string, options: ReadOptions): Promise<Uint8Array> {
    return (await this.readVersioned(path, options)).bytes;
  }

  readVersioned(path: string, options: ReadOptions): Promise<VersionedFile> {
    if (this.reads.readVersioned !== undefined) return this.reads.readVersioned(path, options);
    return readWholeFile(this.store, path, options.maxBytes, options.signal);
  }

  openRead(path: string, options: OperationOptions): Promise<Readable> {
    if (this.reads.openRead !== undefined) return this.reads.openRead(path, options);
    return openReadStream(this.store, path, options.signal);
  }

  writeFile(
    path: string,
    data: WriteData,
    operation: WriteOperation,
    options: WriteOptions,
  ): Promise<WriteResult> {
    return writeAtomically(this.store, path, data, options, operation);
  }

  async stat(path: string, options: OperationOptions): Promise<StorageEntry> {
    const { store } = this;
    const state = await store.inspect(store.driver.scope(options.signal), path, "stat");
    switch (state.kind) {
      case "missing":
      case "blocked":
        throw store.error("not_found", "stat", path);
      case "file":
        return {
          path,
          kind: "file",
          size: state.stats.size,
          modifiedAt: new Date(state.stats.mtimeMs),
          version: state.stats.version,
        };
      case "directory":
        return { path, kind: "directory", size: 0, modifiedAt: new Date(state.stats.mtimeMs) };
      case "other":
        throw store.error("unsupported", "stat", path, "is not a regular file or directory");
    }
  }

  walk(prefix: string, options: WalkOptions): Promise<StorageEntry[]> {
    return walkTree(this.store, prefix, options);
  }

  async hasAny(prefix: string, options: OperationOptions): Promise<boolean> {
    const io = this.store.driver.scope(options.signal);
    if (prefix !== "") {
      const state = await this.store.inspect(io, prefix, "has any");
      if (state.kind === "missing" || state.kind === "blocked") return false;
      if (state.kind !== "directory") return true;
    }
    const entries = await io.readdir(prefix, 1);
    return entries !== undefined && entries.length > 0;
  }

  /**
   * Checks every target before deleting any, so a bad target fails without a partial delete.
   * A fenced target (`options.ifMatch`) is deleted only at its version, under its swap lock; one
   * at another version stays, and the first of those in target order fails the call as
   * `conflict` once every other target is deleted.
   */
  async deletePaths(
    operation: StorageOperation,
    targets: readonly string[],
    options: DeleteOptions,
  ): Promise<void> {
    const { signal } = options;
    const { store } = this;
    const io = store.driver.scope(signal);
    const parallelism = io.capabilities.parallelism;
    // A commit lands after what it commits: the names earlier writes and deletes changed.
    if (options.commit) await flushDirectories(store, io, []);
    // Checked in parallel, but the refusal reported is that of the first target in order (a
    // result must not depend on which answer arrived first).
    const checked = await mapBounded(targets, parallelism, async (target) => {
      throwIfAborted(signal);
      const state = await store.inspect(io, target, operation);
      if (state.kind === "missing" || state.kind === "blocked") {
        if (options.ignoreMissing) return { target: undefined };
        return { refusal: store.error("not_found", operation, target) };
      }
      if (state.kind === "directory") {
        const detail = "is a directory, not a managed file";
        return { refusal: store.error("unsupported", operation, target, detail) };
      }
      if (state.kind === "other") {
        return { refusal: store.error("unsupported", operation, target, "is not a regular file") };
      }
      return { target };
    });
    const refusal = checked.find((result) => "refusal" in result);
    if (refusal !== undefined && "refusal" in refusal) throw refusal.refusal;
    const present = checked.flatMap((result) =>
      "target" in result && result.target !== undefined ? [result.target] : [],
    );
    const conflicts = await mapBounded(
      present,
      parallelism,
      async (target): Promise<StorageError | undefined> => {
        throwIfAborted(signal);
        const expected = options.ifMatch?.get(target);
        try {
          if (expected === undefined) {
            await io.unlink(target);
            return undefined;
          }
          const outcome = await unlinkIfMatch(store, io, target, expected, operation, signal);
          if (outcome === "missing" && !options.ignoreMissing) {
            throw store.error("not_found", operation, target);
          }
          return undefined;
        } catch (error) {
          if (isStorageError(error, "conflict")) return error;
          if (options.ignoreMissing && io.classify(error) === "not_found") return undefined;
          throw io.toStorageError(error, operation, target);
        }
      },
    );
    const deleted = present.filter((_, index) => conflicts[index] === undefined);
    const removed = options.pruneEmptyDirs ? await pruneEmptyParents(store, io, deleted) : [];
    const changed = [...deleted, ...removed].map((path) => splitPath(path).parent);
    if (options.commit) await flushDirectories(store, io, changed);
    else store.changedNames(changed);
    const conflict = conflicts.find((error) => error !== undefined);
    if (conflict !== undefined) throw conflict;
  }

  async deletePrefix(prefix: string, options: DeleteOptions): Promise<void> {
    const { signal } = options;
    const { store } = this;
    const io = store.driver.scope(signal);
    const keep = options.keep === undefined ? undefined : new Set(options.keep);
    if (prefix === "") {
      // The root is kept, and a root that does not exist yet is simply empty.
      store.forget("");
      await emptyDirectory(io, "", keep, signal);
      return;
    }
    const state = await store.inspect(io, prefix, "delete prefix");
    if (state.kind === "missing" || state.kind === "blocked") {
      if (options.ignoreMissing) return;
      throw store.error("not_found", "delete prefix", prefix);
    }
    if (state.kind === "other") {
      const detail = "is not a regular file or directory";
      throw store.error("unsupported", "delete prefix", prefix, detail);
    }
    store.forget(prefix);
    if (keep !== undefined && state.kind === "directory") {
      await emptyDirectory(io, prefix, keep, signal);
      store.changedNames([prefix]);
      return;
    }
    await removeTree(io, prefix, state.kind === "directory", signal);
    const removed = options.pruneEmptyDirs ? await pruneEmptyParents(store, io, [prefix]) : [];
    store.changedNames([prefix, ...removed].map((path) => splitPath(path).parent));
  }

  async close(): Promise<void> {
    await this.store.driver.dispose?.();
  }
}
