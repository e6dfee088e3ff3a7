import type { Stats } from "node:fs";
import { addAbortSignal, Readable } from "node:stream";
import { throwIfAborted } from "../adapter/abort.js";
import { CHUNK_BYTES } from "../adapter/chunk-buffers.js";
import type { ByteReader, VersionedReader } from "../backend.js";
import type { StorageOperation } from "../errors.js";
import type { LocalCalls } from "./calls.js";
import {
  type LocalRoot,
  localError,
  localVersion,
  nativePath,
  rootNotDirectory,
} from "./context.js";
import { READ_FLAGS } from "./driver.js";
import { hasCode, toStorageError } from "./errno.js";

const MIN_READ_BYTES = 16 * 1024;

/**
 * Opens a regular file below the root for reading, refusing symlinks and non-files: the
 * ancestors are checked as every operation checks them, the file itself by opening it without
 * following a link and by fstat of what was opened — one call fewer than lstat, then open.
 */
async function openFile(
  local: LocalRoot,
  path: string,
  operation: StorageOperation,
): Promise<{ fd: number; stats: Stats }> {
  if (!(await local.store.parentIsDirectory(local.store.driver, path, operation))) {
    throw localError("not_found", operation, path);
  }
  let fd: number;
  try {
    fd = await local.calls.open(nativePath(local.root, path), READ_FLAGS);
  } catch (error) {
    if (hasCode(error, "ENOTDIR") && !path.includes("/")) {
      throw rootNotDirectory(local.root, operation, path);
    }
    if (hasCode(error, "ENOENT", "ENOTDIR")) throw localError("not_found", operation, path);
    if (hasCode(error, "ELOOP")) throw local.store.symlinkRefused(operation, path, path);
    if (hasCode(error, "ENXIO")) {
      // A socket (or a FIFO without a writer on some systems): not a regular file.
      throw localError("unsupported", operation, path, "is not a regular file");
    }
    throw toStorageError(error, operation, path);
  }
  try {
    const stats = await local.calls.fstat(fd);
    if (stats.isDirectory()) throw localError("unsupported", operation, path, "is a directory");
    if (!stats.isFile()) throw localError("unsupported", operation, path, "is not a regular file");
    return { fd, stats };
  } catch (error) {
    await closeQuietly(local.calls, fd);
    throw toStorageError(error, operation, path);
  }
}

/**
 * Reads a whole file, failing with `limit_exceeded` as soon as it passes `maxBytes`. The version
 * comes from the open handle: atomic writers replace files by rename, never in place, so the
 * bytes of one handle are those of one version.
 */
export async function readWholeFile(
  local: LocalRoot,
  path: string,
  maxBytes: number | undefined,
  signal: AbortSignal | undefined,
): Promise<{ bytes: Uint8Array; version: string }> {
  const operation = "read file";
  const limit = maxBytes ?? Number.POSITIVE_INFINITY;
  const { fd, stats } = await openFile(local, path, operation);
  const size = stats.size;
  try {
    if (size > limit) throw tooLarge(path, limit);
    // Sized from the stat, plus one byte that detects a file growing past the limit meanwhile.
    const chunks: Buffer[] = [];
    let chunk = Buffer.allocUnsafeSlow(Math.min(size, limit) + 1);
    let filled = 0;
    let total = 0;
    for (;;) {
      throwIfAborted(signal);
      const bytesRead = await local.calls.read(fd, chunk, filled, chunk.length - filled, null);
      if (bytesRead === 0) break;
      filled += bytesRead;
      total += bytesRead;
      if (total > limit) throw tooLarge(path, limit);
      if (filled === chunk.length) {
        chunks.push(chunk);
        chunk = Buffer.allocUnsafeSlow(Math.min(CHUNK_BYTES, limit - total + 1));
        filled = 0;
      }
    }
    chunks.push(chunk.subarray(0, filled));
    const bytes = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total);
    return { bytes, version: localVersion(stats) };
  } catch (error) {
    throw toStorageError(error, operation, path);
  } finally {
    await closeQuietly(local.calls, fd);
  }
}

/** Closes a descriptor only read from: a failed close loses nothing. */
async function closeQuietly(calls: LocalCalls, fd: number): Promise<void> {
  try {
    await calls.close(fd);
  } catch {
    // Nothing was written through it.
  }
}

function tooLarge(path: string, limit: number) {
  return localError("limit_exceeded", "read file", path, `file is larger than ${limit} bytes`);
}

/**
 * A reader that fills the caller's buffers with `read(2)`s, synchronous with blocking calls (see
 * `FileStream` for why). It reads on to the end of the file, so a file that grew since it was listed
 * shows it. A fired signal rejects the next read with its reason.
 *
 * The end costs no extra call when it is certain: a read that came back short exactly at the size
 * the open saw met the end of the file then, and the next read answers 0 without asking again
 * (a small file is one read, not two). Any other short read is followed by a real one.
 */
export async function openByteReader(
  local: LocalRoot,
  path: string,
  signal: AbortSignal | undefined,
): Promise<ByteReader> {
  const { fd, stats } = await openFile(local, path, "open reader");
  return readerOn(local, path, fd, stats, signal, Number.POSITIVE_INFINITY);
}

/**
 * A reader of the whole file with the version of the handle it reads (see `readWholeFile`), its
 * reads failing `limit_exceeded` once the file passes `maxBytes`.
 */
export async function openVersionedReader(
  local: LocalRoot,
  path: string,
  maxBytes: number | undefined,
  signal: AbortSignal | undefined,
): Promise<VersionedReader> {
  const limit = maxBytes ?? Number.POSITIVE_INFINITY;
  const { fd, stats } = await openFile(local, path, "read file");
  if (stats.size > limit) {
    await closeQuietly(local.calls, fd);
    throw tooLarge(path, limit);
  }
  return { reader: readerOn(local, path, fd, stats, signal, limit), version: localVersion(stats) };
}

function readerOn(
  local: LocalRoot,
  path: string,
  fd: number,
  stats: Stats,
  signal: AbortSignal | undefined,
  limit: number,
): ByteReader {
  let closed = false;
  let total = 0;
  let atEnd = false;
  // A read under way on the thread pool: the descriptor is closed after it, never under it (its
  // number could be reused by another open meanwhile).
  let pending: Promise<number> | undefined;
  return {
    async read(into: Uint8Array): Promise<number> {
      throwIfAborted(signal);
      if (closed) throw localError("unavailable", "read file", path, "the reader is closed");
      if (into.length === 0)
        throw new RangeError("ByteReader.read needs a buffer of at least 1 byte");
      if (atEnd) return 0;
      let length: number;
      try {
        pending = local.calls.read(fd, into, 0, into.length, null);
        length = await pending;
      } catch (error) {
        throw toStorageError(error, "read file", path);
      } finally {
        pending = undefined;
      }
      total += length;
      if (total > limit) throw tooLarge(path, limit);
      if (length === 0 || (length < into.length && total === stats.size)) atEnd = true;
      return length;
    },
    close(): void {
      if (closed) return;
      closed = true;
      const close = () => closeQuietly(local.calls, fd);
      if (pending === undefined) void close();
      else void pending.then(close, close);
    },
  };
}

/** A stream of the file's bytes; a signal aborted mid-read destroys it with an AbortError. */
export async function openReadStream(
  local: LocalRoot,
  path: string,
  signal: AbortSignal | undefined,
): Promise<Readable> {
  const { fd, stats } = await openFile(local, path, "open reader");
  if (signal?.aborted) {
    await closeQuietly(local.calls, fd);
    throwIfAborted(signal);
  }
  // One read for a small file, a chunk at a time for a large one.
  const highWaterMark = Math.min(Math.max(stats.size + 1, MIN_READ_BYTES), CHUNK_BYTES);
  const stream = new FileStream(local.calls, fd, stats.size, highWaterMark, path);
  return signal ? addAbortSignal(signal, stream) : stream;
}

/**
 * Reads an open file to its end and closes it, one read of at most one chunk at a time. With
 * blocking calls each is a synchronous `read(2)`: from the page cache that is a copy, far cheaper
 * than the thread-pool round trip of `FileHandle.createReadStream`, and a chunk never takes long
 * even from disk.
 */
class FileStream extends Readable {
  #read = 0;
  #closed = false;
  /** The read under way: the descriptor is closed only after it, never under it. */
  #pending: Promise<unknown> | undefined;

  constructor(
    readonly calls: LocalCalls,
    readonly fd: number,
    readonly expectedSize: number,
    highWaterMark: number,
    readonly path: string,
  ) {
    super({ highWaterMark });
  }

  override _read(size: number): void {
    // Buffers are sized to what is left of the file (small files are common and each buffer is
    // garbage soon); past the size the file had when opened, a 1-byte read finds its end, or
    // shows that it grew.
    const left = this.expectedSize - this.#read;
    const wanted = left > 0 ? Math.min(size, left) : this.#read === this.expectedSize ? 1 : size;
    const buffer = Buffer.allocUnsafe(wanted);
    const pending = this.calls.read(this.fd, buffer, 0, buffer.length, null);
    this.#pending = pending;
    pending.then(
      (bytesRead) => {
        this.#pending = undefined;
        if (this.destroyed) return;
        if (bytesRead === 0) {
          this.#close();
          this.push(null);
          return;
        }
        this.#read += bytesRead;
        this.push(bytesRead === buffer.length ? buffer : buffer.subarray(0, bytesRead));
      },
      (error: unknown) => {
        this.#pending = undefined;
        this.destroy(toStorageError(error, "open reader", this.path));
      },
    );
  }

  #close(): void {
    if (this.#closed) return;
    this.#closed = true;
    // Nothing was written through it; a failed close loses nothing.
    const close = () => closeQuietly(this.calls, this.fd);
    if (this.#pending === undefined) void close();
    else void this.#pending.then(close, close);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.#close();
    callback(error);
  }
}
