import { addAbortSignal, Readable, Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { throwIfAborted } from "../adapter/abort.js";
import { backendErrors, sourceStreamFailed, versionMismatch } from "../adapter/backend-error.js";
import { type BackendOperations, frameBackend } from "../adapter/backend-frame.js";
import { writeSource } from "../adapter/write-source.js";
import type {
  ByteReader,
  DeleteOptions,
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
import { inferContentType } from "../content-type.js";
import type { StorageOperation } from "../errors.js";
import { compareLogicalPaths, isWithinPrefix, relativeTo, validatePath } from "../paths.js";
import { MemoryTree, type StoredFile } from "./tree.js";

const BACKEND_NAME = "memory";
const memoryError = backendErrors(BACKEND_NAME);

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
  const operations = new MemoryOperations(options.now ?? (() => new Date()));
  for (const [path, data] of Object.entries(options.files ?? {})) operations.seed(path, data);
  const location = `${BACKEND_NAME}:${options.label ?? "memory"}`;
  return frameBackend({ name: BACKEND_NAME, location, storesObjectMetadata: true }, operations);
}

class MemoryOperations implements BackendOperations {
  readonly #tree = new MemoryTree();
  readonly #now: () => Date;
  #writes = 0;

  constructor(now: () => Date) {
    this.#now = now;
  }

  seed(path: string, data: Uint8Array | string): void {
    validatePath(path, "write file", BACKEND_NAME);
    const bytes = typeof data === "string" ? Buffer.from(data, "utf8") : Buffer.from(data);
    this.#commit(path, bytes, { overwrite: false }, "write file");
  }

  async readFile(path: string, options: ReadOptions): Promise<Uint8Array> {
    return (await this.readVersioned(path, options)).bytes;
  }

  async readVersioned(path: string, options: ReadOptions): Promise<VersionedFile> {
    const { bytes, version } = this.#file(path, "read file");
    if (options.maxBytes !== undefined && bytes.length > options.maxBytes) {
      throw memoryError(
        "limit_exceeded",
        "read file",
        path,
        `file is larger than ${options.maxBytes} bytes`,
      );
    }
    return { bytes: Buffer.from(bytes), version };
  }

  /**
   * A reader over a copy of the file's bytes, handing out at most 64 KiB per read, so that
   * readers of big files meet many reads here too.
   */
  async openVersionedReader(path: string, options: ReadOptions): Promise<VersionedReader> {
    const { bytes, version } = await this.readVersioned(path, options);
    let at = 0;
    let closed = false;
    const reader: ByteReader = {
      async read(into: Uint8Array): Promise<number> {
        throwIfAborted(options.signal);
        if (closed) throw memoryError("unavailable", "read file", path, "the reader is closed");
        const length = Math.min(into.length, bytes.length - at, 64 * 1024);
        into.set(bytes.subarray(at, at + length));
        at += length;
        return length;
      },
      close() {
        closed = true;
      },
    };
    return { reader, version };
  }

  async openRead(path: string, options: OperationOptions): Promise<Readable> {
    const copy = Buffer.from(this.#file(path, "open reader").bytes);
    const stream = Readable.from([copy], { objectMode: false });
    return options.signal ? addAbortSignal(options.signal, stream) : stream;
  }

  async writeFile(
    path: string,
    data: WriteData,
    operation: StorageOperation,
    options: WriteOptions,
  ): Promise<WriteResult> {
    // Fail fast before consuming a stream that could never be stored.
    this.#checkWritable(path, options, operation);
    const bytes = await collect(data, operation, path, options.signal);
    throwIfAborted(options.signal);
    // Checked again: the tree may have changed while the stream was being consumed.
    return { version: this.#commit(path, bytes, options, operation) };
  }

  async stat(path: string): Promise<StorageEntry> {
    const state = this.#tree.lookup(path);
    if (state.kind === "file") return fileEntry(path, state.file);
    if (state.kind === "directory") return { path, kind: "directory", size: 0 };
    throw memoryError("not_found", "stat", path);
  }

  async walk(prefix: string, options: WalkOptions): Promise<StorageEntry[]> {
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
          add(fileEntry(entryPath, file));
        }
      }
    }
    return [...entries.values()].sort((left, right) => compareLogicalPaths(left.path, right.path));
  }

  async hasAny(prefix: string): Promise<boolean> {
    if (prefix === "") return this.#tree.files.size > 0;
    const kind = this.#tree.lookup(prefix).kind;
    return kind === "file" || kind === "directory";
  }

  /** Every target is checked before any is deleted, as in the local backend. */
  async deletePaths(
    operation: StorageOperation,
    targets: readonly string[],
    options: DeleteOptions,
  ): Promise<void> {
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
    let moved: { target: string; expected: string; current: string | undefined } | undefined;
    for (const target of targets) {
      const expected = options.ifMatch?.get(target);
      const current = this.#tree.files.get(target)?.version;
      if (expected !== undefined && current !== undefined && current !== expected) {
        moved ??= { target, expected, current };
        continue;
      }
      this.#tree.remove(target);
    }
    if (moved !== undefined) {
      throw memoryError(
        "conflict",
        operation,
        moved.target,
        versionMismatch(moved.expected, moved.current),
      );
    }
  }

  async deletePrefix(prefix: string, options: DeleteOptions): Promise<void> {
    const keep = new Set((options.keep ?? []).map((path) => joinSegments(prefix, [path])));
    if (prefix === "" && keep.size === 0) {
      this.#tree.clear();
      return;
    }
    const state = prefix === "" ? { kind: "directory" } : this.#tree.lookup(prefix);
    if (state.kind === "missing" || state.kind === "blocked") {
      if (options.ignoreMissing) return;
      throw memoryError("not_found", "delete prefix", prefix);
    }
    for (const path of [...this.#tree.files.keys()]) {
      if (isWithinPrefix(prefix, path) && !keep.has(path)) this.#tree.remove(path);
    }
  }

  #file(path: string, operation: StorageOperation) {
    const state = this.#tree.lookup(path);
    if (state.kind === "file") return state.file;
    if (state.kind === "directory") {
      throw memoryError("unsupported", operation, path, "is a directory");
    }
    throw memoryError("not_found", operation, path);
  }

  #checkWritable(path: string, options: WriteOptions, operation: StorageOperation): void {
    const state = this.#tree.lookup(path);
    if (state.kind === "blocked") {
      throw memoryError("conflict", operation, path, `"${state.at}" is a file, not a directory`);
    }
    if (state.kind === "directory") {
      throw memoryError("unsupported", operation, path, "is a directory");
    }
    if (options.ifMatch !== undefined) {
      const current = state.kind === "file" ? state.file.version : undefined;
      if (current !== options.ifMatch) {
        throw memoryError("conflict", operation, path, versionMismatch(options.ifMatch, current));
      }
      return;
    }
    if (state.kind === "file" && !options.overwrite) {
      throw memoryError("already_exists", operation, path);
    }
  }

  #commit(path: string, bytes: Buffer, options: WriteOptions, operation: StorageOperation): string {
    this.#checkWritable(path, options, operation);
    this.#writes += 1;
    const version = `m${this.#writes}`;
    const file: StoredFile = {
      bytes,
      modifiedAt: this.#now(),
      version,
      contentType: options.contentType ?? inferContentType(path),
    };
    if (options.cacheControl !== undefined) file.cacheControl = options.cacheControl;
    if (options.contentDisposition !== undefined) {
      file.contentDisposition = options.contentDisposition;
    }
    if (options.contentEncoding !== undefined) file.contentEncoding = options.contentEncoding;
    this.#tree.put(path, file);
    return version;
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
    await pipeline(writeSource(data), sink, { signal });
  } catch (error) {
    // An abort is unwrapped to the signal's reason by the backend frame.
    throw sourceStreamFailed(error, memoryError, operation, path);
  }
  return Buffer.concat(chunks, total);
}

function fileEntry(path: string, file: StoredFile): StorageEntry {
  const entry: StorageEntry = {
    path,
    kind: "file",
    size: file.bytes.length,
    modifiedAt: new Date(file.modifiedAt),
    version: file.version,
  };
  if (file.contentType !== undefined) entry.contentType = file.contentType;
  if (file.cacheControl !== undefined) entry.cacheControl = file.cacheControl;
  if (file.contentDisposition !== undefined) entry.contentDisposition = file.contentDisposition;
  if (file.contentEncoding !== undefined) entry.contentEncoding = file.contentEncoding;
  return entry;
}

function joinSegments(prefix: string, segments: string[]): string {
  const relative = segments.join("/");
  return prefix === "" ? relative : `${prefix}/${relative}`;
}
