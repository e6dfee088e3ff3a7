import { eventLoopTurns, releaseChunkBuffer, takeChunkBuffer } from "./adapter/chunk-buffers.js";
import type { ChunkConsumer, OperationOptions, StorageBackend } from "./backend.js";

type Destroyable = { destroy?: (error?: unknown) => void };

/**
 * Feeds a file's bytes, in order, to `consume` and resolves once it has seen them all or as soon
 * as it returns `false`; an exception thrown by `consume` rejects the call unchanged. A chunk is
 * valid only during its call: with a backend's `openReader` every chunk is read into one reused
 * buffer (no allocation per chunk); without, chunks come from `openRead`, whose stream is
 * destroyed once the consumer stops, fails or the signal fires. Cancellation rejects with the
 * signal's reason.
 */
export async function readFileChunks(
  backend: StorageBackend,
  path: string,
  consume: ChunkConsumer,
  options: OperationOptions = {},
): Promise<void> {
  if (backend.openReader === undefined) {
    return consumeChunks(await backend.openRead(path, options), consume, options.signal);
  }
  const reader = await backend.openReader(path, options);
  const buffer = takeChunkBuffer();
  try {
    const turn = eventLoopTurns();
    for (;;) {
      const length = await reader.read(buffer);
      if (length === 0 || consume(buffer.subarray(0, length)) === false) return;
      const pending = turn(length);
      if (pending !== undefined) await pending;
    }
  } finally {
    reader.close();
    releaseChunkBuffer(buffer);
  }
}

/**
 * Feeds what a stream yields to `consume` until it ends or `consume` returns `false`; the stream
 * is destroyed afterwards, also when the consumer throws or the signal fires (which rejects with
 * the signal's reason, even when the stream failed because of it).
 */
export async function consumeChunks(
  stream: AsyncIterable<Uint8Array>,
  consume: ChunkConsumer,
  signal: AbortSignal | undefined,
): Promise<void> {
  const destroy = (error?: unknown) => (stream as Destroyable).destroy?.(error);
  // A stream that ignores the signal would otherwise keep us waiting for its next chunk.
  const onAbort = () => destroy(signal?.reason);
  signal?.addEventListener("abort", onAbort, { once: true });
  try {
    signal?.throwIfAborted();
    for await (const chunk of stream) {
      signal?.throwIfAborted();
      if (consume(chunk) === false) break;
    }
  } catch (error) {
    // Streams bound to the signal fail with their own AbortError; report the caller's reason.
    signal?.throwIfAborted();
    throw error;
  } finally {
    signal?.removeEventListener("abort", onAbort);
    destroy();
  }
}
