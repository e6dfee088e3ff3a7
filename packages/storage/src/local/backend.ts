import { opendir, unlink } from "node:fs/promises";
import { resolve } from "node:path";
import type { Readable } from "node:stream";
import type {
  DeleteOptions,
  OperationOptions,
  ReadOptions,
  StorageBackend,
  StorageEntry,
  WalkOptions,
  WriteData,
  WriteOptions,
} from "../backend.js";
import type { StorageOperation } from "../errors.js";
import { abortable, throwIfAborted } from "../internal/abort.js";
import { checkCount } from "../internal/limits.js";
import { releaseSource } from "../internal/write-source.js";
import {
  managedBundleTargets,
  managedOutputTargets,
  validatePath,
  validatePrefix,
} from "../paths.js";
import { type LocalRoot, localError, nativePath } from "./context.js";
import { BACKEND_NAME, hasCode, toStorageError } from "./errno.js";
import { inspectPath } from "./inspect.js";
import { openReadStream, readWholeFile } from "./read.js";
import { emptyDirectory, pruneEmptyParents, removeTree } from "./remove.js";
import { walkTree } from "./walk.js";
import { writeAtomically } from "./write.js";

export interface LocalBackendOptions {
  /** Directory every logical path is confined to; relative paths resolve against the cwd. */
  root: string;
}

/** A backend over a directory of the local filesystem. See the package README for semantics. */
export function createLocalBackend(options: LocalBackendOptions): StorageBackend {
  return new LocalBackend(resolve(options.root));
}

type TargetsOf = (bundlePath: string, outputPaths: readonly string[]) => string[];

class LocalBackend implements StorageBackend, LocalRoot {
  readonly name = BACKEND_NAME;
  readonly location: string;
  #closed = false;

  constructor(readonly root: string) {
    this.location = `${BACKEND_NAME}:${root}`;
  }

  async readFile(path: string, options: ReadOptions = {}): Promise<Uint8Array> {
    validatePath(path, "read file", BACKEND_NAME);
    checkCount("maxBytes", options.maxBytes);
    return this.#run("read file", path, options.signal, () =>
      readWholeFile(this, path, options.maxBytes, options.signal),
    );
  }

  async openRead(path: string, options: OperationOptions = {}): Promise<Readable> {
    validatePath(path, "open reader", BACKEND_NAME);
    return this.#run("open reader", path, options.signal, () =>
      openReadStream(this, path, options.signal),
    );
  }

  async writeFile(path: string, data: WriteData, options: WriteOptions = {}): Promise<void> {
    try {
      await this.#writeFile(path, data, options);
    } catch (error) {
      releaseSource(data);
      throw error;
    }
  }

  async #writeFile(path: string, data: WriteData, options: WriteOptions): Promise<void> {
    const operation =
      typeof data === "string" || data instanceof Uint8Array ? "write file" : "write stream";
    validatePath(path, operation, BACKEND_NAME);
    return this.#run(operation, path, options.signal, () =>
      writeAtomically(this, path, data, options, operation),
    );
  }

  async stat(path: string, options: OperationOptions = {}): Promise<StorageEntry> {
    validatePath(path, "stat", BACKEND_NAME);
    return this.#run("stat", path, options.signal, async () => {
      const state = await inspectPath(this, path, "stat");
      switch (state.kind) {
        case "missing":
        case "blocked":
          throw localError("not_found", "stat", path);
        case "file":
          return { path, kind: "file", size: state.stats.size, modifiedAt: state.stats.mtime };
        case "directory":
          return { path, kind: "directory", size: 0, modifiedAt: state.stats.mtime };
        case "other":
          throw localError("unsupported", "stat", path, "is not a regular file or directory");
      }
    });
  }

  async walk(prefix: string, options: WalkOptions): Promise<StorageEntry[]> {
    validatePrefix(prefix, "walk", BACKEND_NAME);
    checkCount("limit", options.limit, true);
    return this.#run("walk", prefix, options.signal, () => walkTree(this, prefix, options));
  }

  async hasAny(prefix: string, options: OperationOptions = {}): Promise<boolean> {
    validatePrefix(prefix, "has any", BACKEND_NAME);
    return this.#run("has any", prefix, options.signal, async () => {
      if (prefix !== "") {
        const state = await inspectPath(this, prefix, "has any");
        if (state.kind === "missing" || state.kind === "blocked") return false;
        if (state.kind !== "directory") return true;
      }
      return directoryHasEntries(nativePath(this, prefix));
    });
  }

  async deleteManagedOutputs(
    bundlePath: string,
    outputPaths: readonly string[],
    options: DeleteOptions = {},
  ): Promise<void> {
    return this.#deleteManaged(
      "delete managed outputs",
      managedOutputTargets,
      bundlePath,
      outputPaths,
      options,
    );
  }

  async deleteManagedBundle(
    bundlePath: string,
    outputPaths: readonly string[],
    options: DeleteOptions = {},
  ): Promise<void> {
    return this.#deleteManaged(
      "delete managed bundle",
      managedBundleTargets,
      bundlePath,
      outputPaths,
      options,
    );
  }

  async deletePrefix(prefix: string, options: DeleteOptions = {}): Promise<void> {
    validatePrefix(prefix, "delete prefix", BACKEND_NAME);
    const { signal } = options;
    return this.#run("delete prefix", prefix, signal, async () => {
      if (prefix === "") {
        // The root is kept, and a root that does not exist yet is simply empty.
        await emptyDirectory(this.root, signal).catch((error: unknown) => {
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
      await removeTree(nativePath(this, prefix), signal);
      if (options.pruneEmptyDirs) await pruneEmptyParents(this, prefix);
    });
  }

  async close(): Promise<void> {
    this.#closed = true;
  }

  /**
   * Checks every target before deleting any, so a directory or missing target fails the call
   * without a partial delete.
   */
  async #deleteManaged(
    operation: StorageOperation,
    targetsOf: TargetsOf,
    bundlePath: string,
    outputPaths: readonly string[],
    options: DeleteOptions,
  ): Promise<void> {
    validatePrefix(bundlePath, operation, BACKEND_NAME);
    for (const outputPath of outputPaths) validatePath(outputPath, operation, BACKEND_NAME);
    const targets = [...new Set(targetsOf(bundlePath, outputPaths))];
    const { signal } = options;
    return this.#run(operation, bundlePath, signal, async () => {
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
      for (const target of present) {
        throwIfAborted(signal);
        try {
          await unlink(nativePath(this, target));
        } catch (error) {
          if (!(options.ignoreMissing && hasCode(error, "ENOENT"))) {
            throw toStorageError(error, operation, target);
          }
        }
        if (options.pruneEmptyDirs) await pruneEmptyParents(this, target);
      }
    });
  }

  /** Common frame: closed check, abort check, abort unwrapping and errno mapping. */
  async #run<T>(
    operation: StorageOperation,
    path: string,
    signal: AbortSignal | undefined,
    body: () => Promise<T>,
  ): Promise<T> {
    if (this.#closed) {
      throw localError("unavailable", operation, path, "backend is closed");
    }
    return abortable(signal, body, (error) => toStorageError(error, operation, path));
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
