import { unlinkSync } from "node:fs";
import { opendir, unlink } from "node:fs/promises";
import { basename, dirname, resolve } from "node:path";
import type { Readable } from "node:stream";
import type {
  ByteReader,
  DeleteOptions,
  OperationOptions,
  ReadOptions,
  StorageBackend,
  StorageEntry,
  VersionedFile,
  WalkOptions,
  WriteData,
  WriteOptions,
  WriteResult,
} from "../backend.js";
import { isStorageError, type StorageError, type StorageOperation } from "../errors.js";
import { throwIfAborted } from "../internal/abort.js";
import {
  type BackendOperations,
  frameBackend,
  type WriteOperation,
} from "../internal/backend-frame.js";
import {
  type LocalRoot,
  localError,
  localVersion,
  nativePath,
  rootNotDirectory,
} from "./context.js";
import { BACKEND_NAME, hasCode, toStorageError } from "./errno.js";
import { inspectPath } from "./inspect.js";
import { openByteReader, openReadStream, readWholeFile } from "./read.js";
import { emptyDirectory, emptyDirectoryExcept, pruneEmptyParents, removeTree } from "./remove.js";
import { withSwapLock } from "./swap-lock.js";
import { walkTree } from "./walk.js";
import { checkVersion, writeAtomically } from "./write.js";

export interface LocalBackendOptions {
  /** Directory every logical path is confined to; relative paths resolve against the cwd. */
  root: string;
  /**
   * Flush every written file to disk before moving it into place (default true). With false,
   * only commit files (`.distributor.json`, the lease) and their directories are flushed: a
   * power cut may then lose outputs the state already records, as with `cp` or `rclone`.
   */
  fsync?: boolean;
}

/**
 * Writes kept in flight by a publishing engine: the libuv thread pool (raised by the CLI) runs
 * their fsyncs side by side, which on most disks costs little more than one.
 */
const LOCAL_WRITE_CONCURRENCY = 16;

/** A backend over a directory of the local filesystem. See the package README for semantics. */
export function createLocalBackend(options: LocalBackendOptions): StorageBackend {
  const root = resolve(options.root);
  return frameBackend(
    {
      name: BACKEND_NAME,
      location: `${BACKEND_NAME}:${root}`,
      writeConcurrency: LOCAL_WRITE_CONCURRENCY,
      mapError: toStorageError,
    },
    new LocalOperations(root, options.fsync ?? true),
  );
}

class LocalOperations implements BackendOperations, LocalRoot {
  readonly unflushed = new Set<string>();
  readonly writing = new Map<string, number>();
  readonly made = new Set<string>();

  constructor(
    readonly root: string,
    readonly fsync: boolean,
  ) {}

  async readFile(path: string, options: ReadOptions): Promise<Uint8Array> {
    return (await this.readVersioned(path, options)).bytes;
  }

  readVersioned(path: string, options: ReadOptions): Promise<VersionedFile> {
    return readWholeFile(this, path, options.maxBytes, options.signal);
  }

  openRead(path: string, options: OperationOptions): Promise<Readable> {
    return openReadStream(this, path, options.signal);
  }

  openReader(path: string, options: OperationOptions): Promise<ByteReader> {
    return openByteReader(this, path, options.signal);
  }

  writeFile(
    path: string,
    data: WriteData,
    operation: WriteOperation,
    options: WriteOptions,
  ): Promise<WriteResult> {
    return writeAtomically(this, path, data, options, operation);
  }

  async stat(path: string): Promise<StorageEntry> {
    const state = await inspectPath(this, path, "stat");
    switch (state.kind) {
      case "missing":
      case "blocked":
        throw localError("not_found", "stat", path);
      case "file":
        return {
          path,
          kind: "file",
          size: state.stats.size,
          modifiedAt: state.stats.mtime,
          version: localVersion(state.stats),
        };
      case "directory":
        return { path, kind: "directory", size: 0, modifiedAt: state.stats.mtime };
      case "other":
        throw localError("unsupported", "stat", path, "is not a regular file or directory");
    }
  }

  walk(prefix: string, options: WalkOptions): Promise<StorageEntry[]> {
    return walkTree(this, prefix, options);
  }

  async hasAny(prefix: string): Promise<boolean> {
    if (prefix !== "") {
      const state = await inspectPath(this, prefix, "has any");
      if (state.kind === "missing" || state.kind === "blocked") return false;
      if (state.kind !== "directory") return true;
    }
    try {
      return await directoryHasEntries(nativePath(this, prefix));
    } catch (error) {
      if (prefix === "" && hasCode(error, "ENOTDIR")) throw rootNotDirectory(this, "has any", "");
      throw error;
    }
  }

  /** Checks every target before deleting any, so a bad target fails without a partial delete. */
  async deleteManaged(
    operation: StorageOperation,
    targets: readonly string[],
    options: DeleteOptions,
  ): Promise<void> {
    const { signal } = options;
    const present: string[] = [];
    for (const target of targets) {
      throwIfAborted(signal);
      const state = await inspectPath(this, target, operation);
      if (state.kind === "missing" || state.kind === "blocked") {
        if (options.ignoreMissing) continue;
        throw localError("not_found", operation, target);
      }
      if (state.kind === "directory") {
        throw localError("unsupported", operation, target, "is a directory, not a managed file");
      }
      if (state.kind === "other") {
        throw localError("unsupported", operation, target, "is not a regular file");
      }
      present.push(target);
    }
    let moved: StorageError | undefined;
    for (const target of present) {
      throwIfAborted(signal);
      const expected = options.ifMatch?.get(target);
      try {
        if (expected === undefined) await unlink(nativePath(this, target));
        else await this.#unlinkIfMatch(target, expected, operation);
      } catch (error) {
        if (isStorageError(error, "conflict")) {
          moved ??= error;
          continue;
        }
        if (!(options.ignoreMissing && hasCode(error, "ENOENT"))) {
          throw toStorageError(error, operation, target);
        }
      }
      if (options.pruneEmptyDirs) await pruneEmptyParents(this, target);
    }
    if (moved !== undefined) throw moved;
  }

  /**
   * Unlinks `target` only while it is still at version `expected`: the check and the unlink run
   * under the target's swap lock, as a compare-and-swap's check and rename do, so a write of a
   * newer version cannot land between them. A file already gone counts as missing (ENOENT).
   */
  async #unlinkIfMatch(target: string, expected: string, operation: StorageOperation) {
    const native = nativePath(this, target);
    await withSwapLock(dirname(native), basename(native), async () => {
      const state = await inspectPath(this, target, operation);
      if (state.kind === "missing" || state.kind === "blocked") {
        throw Object.assign(new Error(`${target} is gone`), { code: "ENOENT" });
      }
      checkVersion(state, expected, operation, target);
      unlinkSync(native);
    });
  }

  async deletePrefix(prefix: string, options: DeleteOptions): Promise<void> {
    const { signal } = options;
    if (prefix === "") {
      // The root is kept, and a root that does not exist yet is simply empty.
      const keep = options.keep;
      const empty =
        keep === undefined
          ? emptyDirectory(this.root, signal)
          : emptyDirectoryExcept(this.root, new Set(keep), signal);
      await empty.catch((error: unknown) => {
        if (hasCode(error, "ENOTDIR")) throw rootNotDirectory(this, "delete prefix", "");
        if (!hasCode(error, "ENOENT")) throw error;
      });
      return;
    }
    const state = await inspectPath(this, prefix, "delete prefix");
    if (state.kind === "missing" || state.kind === "blocked") {
      if (options.ignoreMissing) return;
      throw localError("not_found", "delete prefix", prefix);
    }
    if (state.kind === "other") {
      throw localError(
        "unsupported",
        "delete prefix",
        prefix,
        "is not a regular file or directory",
      );
    }
    if (options.keep !== undefined && state.kind === "directory") {
      await emptyDirectoryExcept(nativePath(this, prefix), new Set(options.keep), signal);
      return;
    }
    await removeTree(nativePath(this, prefix), signal);
    if (options.pruneEmptyDirs) await pruneEmptyParents(this, prefix);
  }
}

async function directoryHasEntries(native: string): Promise<boolean> {
  let dir: Awaited<ReturnType<typeof opendir>>;
  try {
    dir = await opendir(native);
  } catch (error) {
    if (hasCode(error, "ENOENT")) return false;
    throw error;
  }
  try {
    return (await dir.read()) !== null;
  } finally {
    await dir.close();
  }
}
