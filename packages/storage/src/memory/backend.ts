import { addAbortSignal, Readable, Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
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
import { StorageError, type StorageErrorKind, type StorageOperation } from "../errors.js";
import { abortable, throwIfAborted } from "../internal/abort.js";
import { checkCount } from "../internal/limits.js";
import { releaseSource, writeSource } from "../internal/write-source.js";
import {
  compareLogicalPaths,
  isWithinPrefix,
  managedBundleTargets,
  managedOutputTargets,
  relativeTo,
  validatePath,
  validatePrefix,
} from "../paths.js";
import { MemoryTree } from "./tree.js";

const BACKEND_NAME = "memory";

export interface MemoryBackendOptions {
  /** Files to start with, by logical path; strings are stored as UTF-8. */
  files?: Record<string, Uint8Array | string>;
  /** Clock for `modifiedAt` (tests pin it). */
  now?: () => Date;
  /** Shown in `location` as `memory:<label>`; defaults to `memory`. */
  label?: string;
}

/** A backend holding files in process memory, with the same semantics as the local backend. */
export function createMemoryBackend(options: MemoryBackendOptions = {}): StorageBackend {
  const backend = new MemoryBackend(options.label ?? "memory", options.now ?? (() => new Date()));
  for (const [path, data] of Object.entries(options.files ?? {})) backend.seed(path, data);
  return backend;
}

type TargetsOf = (bundlePath: string, outputPaths: readonly string[]) => string[];

class MemoryBackend implements StorageBackend {
  readonly name = BACKEND_NAME;
  readonly location: string;
  readonly #tree = new MemoryTree();
  readonly #now: () => Date;
  #closed = false;

  constructor(label: string, now: () => Date) {
    this.location = `${BACKEND_NAME}:${label}`;
    this.#now = now;
  }

  seed(path: string, data: Uint8Array | string): void {
    validatePath(path, "write file", BACKEND_NAME);
    const bytes = typeof data === "string" ? Buffer.from(data, "utf8") : Buffer.from(data);
    this.#commit(path, bytes, false, "write file");
  }

  async readFile(path: string, options: ReadOptions = {}): Promise<Uint8Array> {
    validatePath(path, "read file", BACKEND_NAME);
    checkCount("maxBytes", options.maxBytes);
    return this.#run("read file", path, options.signal, async () => {
      const bytes = this.#file(path, "read file").bytes;
      if (options.maxBytes !== undefined && bytes.length > options.maxBytes) {
        throw memoryError(
          "limit_exceeded",
          "read file",
          path,
          `file is larger than ${options.maxBytes} bytes`,
        );
      }
      return Buffer.from(bytes);
    });
  }

  async openRead(path: string, options: OperationOptions = {}): Promise<Readable> {
    validatePath(path, "open reader", BACKEND_NAME);
    const { signal } = options;
    return this.#run("open reader", path, signal, async () => {
      const copy = Buffer.from(this.#file(path, "open reader").bytes);
      const stream = Readable.from([copy], { objectMode: false });
      return signal ? addAbortSignal(signal, stream) : stream;
    });
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
    const overwrite = options.overwrite ?? false;
    const { signal } = options;
    return this.#run(operation, path, signal, async () => {
      // Fail fast before consuming a stream that could never be stored.
      this.#checkWritable(path, overwrite, operation);
      const bytes = await collect(data, operation, path, signal);
      throwIfAborted(signal);
      // Checked again: the tree may have changed while the stream was being consumed.
      this.#commit(path, bytes, overwrite, operation);
    });
  }

  async stat(path: string, options: OperationOptions = {}): Promise<StorageEntry> {
    validatePath(path, "stat", BACKEND_NAME);
    return this.#run("stat", path, options.signal, async () => {
      const state = this.#tree.lookup(path);
      if (state.kind === "file") {
        const { bytes, modifiedAt } = state.file;
        return { path, kind: "file", size: bytes.length, modifiedAt: new Date(modifiedAt) };
      }
      if (state.kind === "directory") return { path, kind: "directory", size: 0 };
      throw memoryError("not_found", "stat", path);
    });
  }

  async walk(prefix: string, options: WalkOptions): Promise<StorageEntry[]> {
    validatePrefix(prefix, "walk", BACKEND_NAME);
    checkCount("limit", options.limit, true);
    return this.#run("walk", prefix, options.signal, async () => {
      if (prefix !== "" && !this.#tree.isDirectory(prefix)) return [];
      const entries = new Map<string, StorageEntry>();
      const add = (entry: StorageEntry): void => {
        if (entries.has(entry.path)) return;
        entries.set(entry.path, entry);
        if (entries.size > options.limit) {
          throw memoryError("limit_exceeded", "walk", prefix, `more than ${options.limit} entries`);
        }
      };
      for (const [path, file] of this.#tree.files) {
        if (path === prefix || !isWithinPrefix(prefix, path)) continue;
        const segments = relativeTo(prefix, path).split("/");
        const depth = options.recursive ? segments.length : 1;
        for (let index = 1; index <= depth; index++) {
          const entryPath = joinSegments(prefix, segments.slice(0, index));
          if (index < segments.length) add({ path: entryPath, kind: "directory", size: 0 });
          else {
            add({
              path: entryPath,
              kind: "file",
              size: file.bytes.length,
              modifiedAt: new Date(file.modifiedAt),
            });
          }
        }
      }
      return [...entries.values()].sort((left, right) =>
        compareLogicalPaths(left.path, right.path),
      );
    });
  }

  async hasAny(prefix: string, options: OperationOptions = {}): Promise<boolean> {
    validatePrefix(prefix, "has any", BACKEND_NAME);
    return this.#run("has any", prefix, options.signal, async () => {
      if (prefix === "") return this.#tree.files.size > 0;
      const kind = this.#tree.lookup(prefix).kind;
      return kind === "file" || kind === "directory";
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
    return this.#run("delete prefix", prefix, options.signal, async () => {
      if (prefix === "") {
        this.#tree.clear();
        return;
      }
      const state = this.#tree.lookup(prefix);
      if (state.kind === "missing" || state.kind === "blocked") {
        if (options.ignoreMissing) return;
        throw memoryError("not_found", "delete prefix", prefix);
      }
      for (const path of [...this.#tree.files.keys()]) {
        if (isWithinPrefix(prefix, path)) this.#tree.remove(path);
      }
    });
  }

  async close(): Promise<void> {
    this.#closed = true;
  }

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
    return this.#run(operation, bundlePath, options.signal, async () => {
      // Every target is checked before any is deleted, as in the local backend.
      for (const target of targets) {
        const kind = this.#tree.lookup(target).kind;
        if (kind === "directory") {
          throw memoryError("unsupported", operation, target, "is a directory, not a managed file");
        }
        if (kind !== "file" && !options.ignoreMissing) {
          throw memoryError("not_found", operation, target);
        }
      }
      // Directories vanish with their last file, so `pruneEmptyDirs` has nothing left to do.
      for (const target of targets) this.#tree.remove(target);
    });
  }

  #file(path: string, operation: StorageOperation) {
    const state = this.#tree.lookup(path);
    if (state.kind === "file") return state.file;
    if (state.kind === "directory") {
      throw memoryError("unsupported", operation, path, "is a directory");
    }
    throw memoryError("not_found", operation, path);
  }

  #checkWritable(path: string, overwrite: boolean, operation: StorageOperation): void {
    const state = this.#tree.lookup(path);
    if (state.kind === "blocked") {
      throw memoryError("conflict", operation, path, `"${state.at}" is a file, not a directory`);
    }
    if (state.kind === "directory")
      throw memoryError("unsupported", operation, path, "is a directory");
    if (state.kind === "file" && !overwrite) throw memoryError("already_exists", operation, path);
  }

  #commit(path: string, bytes: Buffer, overwrite: boolean, operation: StorageOperation): void {
    this.#checkWritable(path, overwrite, operation);
    this.#tree.put(path, { bytes, modifiedAt: this.#now() });
  }

  async #run<T>(
    operation: StorageOperation,
    path: string,
    signal: AbortSignal | undefined,
    body: () => Promise<T>,
  ): Promise<T> {
    if (this.#closed) throw memoryError("unavailable", operation, path, "backend is closed");
    return abortable(signal, body);
  }
}

/** Consumes a write payload into one private buffer; nothing is stored until it all arrived. */
async function collect(
  data: WriteData,
  operation: StorageOperation,
  path: string,
  signal: AbortSignal | undefined,
): Promise<Buffer> {
  if (typeof data === "string") return Buffer.from(data, "utf8");
  if (data instanceof Uint8Array) return Buffer.from(data);
  const chunks: Buffer[] = [];
  let total = 0;
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      // Copied: a producer may reuse its chunk buffers after handing them over.
      chunks.push(Buffer.from(chunk));
      total += chunk.length;
      callback();
    },
  });
  try {
    await pipeline(writeSource(data), sink, signal ? { signal } : {});
  } catch (error) {
    // An abort is unwrapped to the signal's reason by `abortable`.
    if (error instanceof StorageError) throw error;
    const message = error instanceof Error ? error.message : String(error);
    throw memoryError("unavailable", operation, path, `source stream failed: ${message}`, error);
  }
  return Buffer.concat(chunks, total);
}

function joinSegments(prefix: string, segments: string[]): string {
  const relative = segments.join("/");
  return prefix === "" ? relative : `${prefix}/${relative}`;
}

function memoryError(
  kind: StorageErrorKind,
  operation: StorageOperation,
  path: string,
  detail?: string,
  cause?: unknown,
): StorageError {
  return new StorageError({
    kind,
    operation,
    backend: BACKEND_NAME,
    path,
    ...(detail === undefined ? {} : { detail }),
    ...(cause === undefined ? {} : { cause }),
  });
}
