import type { ChunkConsumer, OperationOptions, StorageBackend } from "./backend.js";

type Destroyable = { destroy?: (error?: unknown) => void };

/**
 * Feeds a file's bytes to `consume` (see `StorageBackend.readChunks`): through the backend's own
 * `readChunks` where it has one, else through `openRead`, whose stream is destroyed once the
 * consumer stops, fails or the signal fires. Cancellation rejects with the signal's reason.
 */
export async function readFileChunks(
  backend: StorageBackend,
  path: string,
  consume: ChunkConsumer,
  options: OperationOptions = {},
): Promise<void> {
  if (backend.readChunks !== undefined) return backend.readChunks(path, consume, options);
  return consumeChunks(await backend.openRead(path, options), consume, options.signal);
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
