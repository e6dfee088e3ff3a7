import { Readable } from "node:stream";
import { throwIfAborted } from "../adapter/abort.js";
import type { VersionedFile } from "../backend.js";
import type { StorageOperation } from "../errors.js";
import type { FsDriver, FsStats } from "./driver.js";
import type { FsStore } from "./store.js";

/**
 * Opens a regular file below the root for reading. Symlinks on the way are refused by the
 * inspection; the handle's own fstat confirms a regular file after the open, for stores whose
 * open cannot refuse a final symlink itself.
 */
async function openFile<Handle>(
  store: FsStore<Handle>,
  io: FsDriver<Handle>,
  path: string,
  operation: StorageOperation,
): Promise<{ handle: Handle; stats: FsStats }> {
  const state = await store.inspect(io, path, operation);
  if (state.kind === "missing" || state.kind === "blocked") {
    throw store.error("not_found", operation, path);
  }
  if (state.kind === "directory")
    throw store.error("unsupported", operation, path, "is a directory");
  if (state.kind === "other") {
    throw store.error("unsupported", operation, path, "is not a regular file");
  }
  let handle: Handle;
  try {
    handle = await io.openRead(path);
  } catch (error) {
    if (io.classify(error) === "not_found") throw store.error("not_found", operation, path);
    throw error;
  }
  try {
    const stats = await io.fstat(handle);
    if (stats.kind !== "file") {
      throw store.error("unsupported", operation, path, "is not a regular file");
    }
    return { handle, stats };
  } catch (error) {
    await io.tidy((clean) => clean.close(handle));
    throw error;
  }
}

async function readAt<Handle>(
  io: FsDriver<Handle>,
  handle: Handle,
  position: number,
  length: number,
): Promise<Buffer> {
  const buffer = Buffer.allocUnsafe(length);
  const bytes = await io.read(handle, buffer, position);
  return buffer.subarray(0, bytes);
}

/**
 * Reads a whole file with the version of its handle's fstat, failing with `limit_exceeded` as
 * soon as it passes `maxBytes`. Atomic writers replace files by rename, so one handle reads the
 * bytes of one version.
 */
export async function readWholeFile<Handle>(
  store: FsStore<Handle>,
  path: string,
  maxBytes: number | undefined,
  signal: AbortSignal | undefined,
): Promise<VersionedFile> {
  const io = store.driver.scope(signal, true);
  const operation = "read file";
  const limit = maxBytes ?? Number.POSITIVE_INFINITY;
  const { handle, stats } = await openFile(store, io, path, operation);
  const tooLarge = () =>
    store.error("limit_exceeded", operation, path, `file is larger than ${limit} bytes`);
  try {
    if (stats.size > limit) throw tooLarge();
    const chunks: Buffer[] = [];
    let total = 0;
    const step = io.capabilities.readBlockBytes;
    for (;;) {
      throwIfAborted(signal);
      // Several reads at once up to the size fstat gave, then one that must find the end.
      const remaining = Math.max(stats.size - total, 0);
      const count =
        remaining === 0 ? 1 : Math.min(io.capabilities.readsInFlight, Math.ceil(remaining / step));
      const parts = await Promise.all(
        Array.from({ length: count }, (_, index) => readAt(io, handle, total + index * step, step)),
      );
      let ended = false;
      for (const part of parts) {
        if (part.length === 0) {
          ended = true;
          break;
        }
        chunks.push(part);
        total += part.length;
        if (total > limit) throw tooLarge();
        // A short read leaves a gap before the next part's offset: read on from here.
        if (part.length < step) break;
      }
      if (ended) break;
    }
    return { bytes: Buffer.concat(chunks, total), version: stats.version };
  } finally {
    await io.tidy((clean) => clean.close(handle));
  }
}

/**
 * A stream of the file's bytes with several reads outstanding, delivered in order. The handle
 * is closed when the stream ends or is destroyed; a signal destroys it with the reason.
 */
export async function openReadStream<Handle>(
  store: FsStore<Handle>,
  path: string,
  signal: AbortSignal | undefined,
): Promise<Readable> {
  const io = store.driver.scope(signal, true);
  const { handle } = await openFile(store, io, path, "open reader");
  const closeQuietly = () => io.tidy((clean) => clean.close(handle));
  if (signal?.aborted) {
    await closeQuietly();
    throwIfAborted(signal);
  }
  const step = io.capabilities.readBlockBytes;
  const inFlight = io.capabilities.readsInFlight;
  let nextOffset = 0;
  let ended = false;
  const queue: { offset: number; bytes: Promise<Buffer> }[] = [];
  const fill = () => {
    while (!ended && queue.length < inFlight) {
      const offset = nextOffset;
      const bytes = readAt(io, handle, offset, step);
      // Settled later or discarded; never an unhandled rejection.
      bytes.catch(() => undefined);
      queue.push({ offset, bytes });
      nextOffset += step;
    }
  };
  const stream = new Readable({
    highWaterMark: step * 2,
    read() {
      fill();
      const head = queue.shift();
      if (head === undefined) {
        this.push(null);
        return;
      }
      head.bytes.then(
        (chunk) => {
          if (ended) return;
          if (chunk.length === 0) {
            ended = true;
            queue.length = 0;
            this.push(null);
            return;
          }
          if (chunk.length < step) {
            // A short read (usually the end): later reads started past a gap, so start over.
            queue.length = 0;
            nextOffset = head.offset + chunk.length;
          }
          this.push(chunk);
        },
        (error: unknown) => this.destroy(error as Error),
      );
    },
    destroy(error, callback) {
      ended = true;
      queue.length = 0;
      closeQuietly().then(() => callback(error));
    },
  });
  if (signal) {
    const onAbort = () => stream.destroy(signal.reason as Error);
    signal.addEventListener("abort", onAbort, { once: true });
    stream.once("close", () => signal.removeEventListener("abort", onAbort));
  }
  return stream;
}
