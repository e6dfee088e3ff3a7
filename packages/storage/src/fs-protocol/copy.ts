import { throwIfAborted } from "../adapter/abort.js";
import { sourceStreamFailed } from "../adapter/backend-error.js";
import { eventLoopTurns, releaseChunkBuffer, takeChunkBuffer } from "../adapter/chunk-buffers.js";
import { isByteReader, writeSource } from "../adapter/write-source.js";
import type { ByteReader, WriteData } from "../backend.js";
import type { StorageOperation } from "../errors.js";
import type { FsDriver } from "./driver.js";
import type { FsStore } from "./store.js";

/**
 * Copies the payload into the open temp file with up to the driver's `writesInFlight` writes
 * outstanding, in blocks of at most `blockBytes`. A failure of the store is the backend's;
 * anything else came from the caller's source, whose errors can look just like ours (a source
 * file's ENOENT) but say nothing about the target.
 */
export async function copyInto<Handle>(
  store: FsStore<Handle>,
  io: FsDriver<Handle>,
  handle: Handle,
  data: WriteData,
  signal: AbortSignal | undefined,
  operation: StorageOperation,
  path: string,
): Promise<void> {
  const writer = new BlockWriter(io, handle);
  // A lost connection fails the write even while it waits for its source.
  const unsubscribe = io.onLost?.((error) => writer.fail(error));
  try {
    if (isByteReader(data)) await copyFromReader(store, writer, data, signal, operation, path);
    else await copyFromSource(store, writer, data, signal, operation, path);
    await writer.drain();
  } finally {
    unsubscribe?.();
  }
}

/**
 * Writes blocks at increasing offsets with a bounded number in flight; the first failure stops
 * everything and is what every later step reports.
 */
class BlockWriter<Handle> {
  readonly limit: number;
  readonly blockBytes: number;
  #position = 0;
  #inFlight = 0;
  #failure: { error: unknown } | undefined;
  #wake: (() => void) | undefined;
  readonly #lost: ((error: unknown) => void)[] = [];

  constructor(
    readonly io: FsDriver<Handle>,
    readonly handle: Handle,
  ) {
    this.limit = Math.max(1, io.capabilities.writesInFlight);
    this.blockBytes = io.capabilities.writeBlockBytes;
  }

  get failure(): { error: unknown } | undefined {
    return this.#failure;
  }

  fail(error: unknown): void {
    this.#failure ??= { error };
    for (const listener of this.#lost.splice(0)) listener(error);
    this.#settle();
  }

  /** Calls `listener` on the first failure (to stop waiting on the source). */
  onFailure(listener: (error: unknown) => void): void {
    if (this.#failure !== undefined) listener(this.#failure.error);
    else this.#lost.push(listener);
  }

  /** Waits for a free slot; throws the failure if there is one. */
  async room(): Promise<void> {
    while (this.#inFlight >= this.limit && this.#failure === undefined) await this.#sleep();
    if (this.#failure !== undefined) throw this.#failure.error;
  }

  /** Starts one write of `block` (which must stay untouched until `done` is called). */
  send(block: Uint8Array, done?: () => void): void {
    const offset = this.#position;
    this.#position += block.length;
    this.#inFlight++;
    this.io
      .write(this.handle, block, offset)
      .then(
        () => done?.(),
        (error: unknown) => this.fail(error),
      )
      .finally(() => {
        this.#inFlight--;
        this.#settle();
      });
  }

  async drain(): Promise<void> {
    // A lost session never answers its requests: the failure ends the wait.
    while (this.#inFlight > 0 && this.#failure === undefined) await this.#sleep();
    if (this.#failure !== undefined) throw this.#failure.error;
  }

  #sleep(): Promise<void> {
    return new Promise((resolve) => {
      this.#wake = resolve;
    });
  }

  #settle(): void {
    const resume = this.#wake;
    this.#wake = undefined;
    resume?.();
  }
}

/**
 * A reader fills whole blocks of pooled buffers straight from the source; a buffer goes back to
 * the pool when its write is answered (not before: the request may still hold it), so a file
 * costs no buffer of its own beyond the writes in flight. Every 8 MiB the loop lets the event
 * loop turn (local writes never wait).
 */
async function copyFromReader<Handle>(
  store: FsStore<Handle>,
  writer: BlockWriter<Handle>,
  reader: ByteReader,
  signal: AbortSignal | undefined,
  operation: StorageOperation,
  path: string,
): Promise<void> {
  const turn = eventLoopTurns();
  for (let ended = false; !ended; ) {
    await writer.room();
    throwIfAborted(signal);
    const buffer = takeChunkBuffer();
    const block = buffer.subarray(0, Math.min(buffer.length, writer.blockBytes));
    let filled = 0;
    try {
      while (filled < block.length) {
        const length = await reader.read(block.subarray(filled));
        if (length === 0) {
          ended = true;
          break;
        }
        filled += length;
      }
    } catch (error) {
      releaseChunkBuffer(buffer);
      throwIfAborted(signal);
      throw sourceStreamFailed(error, store.error, operation, path);
    }
    if (filled === 0 || writer.failure !== undefined) {
      releaseChunkBuffer(buffer);
      continue;
    }
    writer.send(block.subarray(0, filled), () => releaseChunkBuffer(buffer));
    const pending = turn(filled);
    if (pending !== undefined) await pending;
  }
}

/**
 * A stream, iterable or buffer. With one write in flight each chunk goes out as it comes (in
 * pieces of at most a block) before the next is taken, so nothing is copied. With several,
 * chunks are gathered into whole blocks, and a block is always memory of its own: it may wait
 * for a slot while the caller reuses the chunk.
 */
async function copyFromSource<Handle>(
  store: FsStore<Handle>,
  writer: BlockWriter<Handle>,
  data: WriteData,
  signal: AbortSignal | undefined,
  operation: StorageOperation,
  path: string,
): Promise<void> {
  const source = writeSource(data);
  const onAbort = () => destroySource(source, signal?.reason);
  signal?.addEventListener("abort", onAbort, { once: true });
  writer.onFailure((error) => destroySource(source, error));
  const gather = writer.limit > 1;
  let pending: Uint8Array[] = [];
  let pendingBytes = 0;
  const sendBlocks = async (all: boolean) => {
    while (pendingBytes >= writer.blockBytes || (all && pendingBytes > 0)) {
      const joined = pending.length === 1 ? (pending[0] as Uint8Array) : Buffer.concat(pending);
      const block = Buffer.from(joined.subarray(0, Math.min(writer.blockBytes, joined.length)));
      const rest = joined.subarray(block.length);
      pending = rest.length > 0 ? [rest] : [];
      pendingBytes = rest.length;
      await writer.room();
      writer.send(block);
    }
  };
  try {
    throwIfAborted(signal);
    let iterator: Iterator<Uint8Array> | AsyncIterator<Uint8Array>;
    try {
      iterator =
        Symbol.asyncIterator in source
          ? (source as AsyncIterable<Uint8Array>)[Symbol.asyncIterator]()
          : (source as Iterable<Uint8Array>)[Symbol.iterator]();
    } catch (error) {
      throw sourceStreamFailed(error, store.error, operation, path);
    }
    for (;;) {
      let next: IteratorResult<Uint8Array>;
      try {
        next = await iterator.next();
      } catch (error) {
        throwIfAborted(signal);
        if (writer.failure !== undefined) throw writer.failure.error;
        throw sourceStreamFailed(error, store.error, operation, path);
      }
      if (next.done) break;
      throwIfAborted(signal);
      const chunk = next.value;
      if (gather) {
        pending.push(chunk);
        pendingBytes += chunk.length;
        await sendBlocks(false);
        continue;
      }
      for (let offset = 0; offset < chunk.length; offset += writer.blockBytes) {
        await writer.room();
        writer.send(chunk.subarray(offset, offset + writer.blockBytes));
      }
      // The chunk is the caller's: it must be written before the next one is asked for.
      await writer.drain();
    }
    await sendBlocks(true);
  } catch (error) {
    destroySource(source, error);
    throw error;
  } finally {
    signal?.removeEventListener("abort", onAbort);
  }
}

function destroySource(source: unknown, error: unknown): void {
  const destroy = (source as { destroy?: unknown }).destroy;
  if (typeof destroy === "function") destroy.call(source, error);
}
