import { addAbortSignal, Readable } from "node:stream";
import type { ByteReader, WriteData } from "@distributor/storage";
import { writeSource } from "@distributor/storage/adapter";

/** The payload's bytes could not be read: the source's fault, not the bucket's. */
export class SourceFailure extends Error {
  override readonly name = "SourceFailure";
}

/** The payload as Buffers; a failing or cancelled source surfaces as `SourceFailure`/the abort. */
export async function* readChunks(
  data: WriteData,
  signal: AbortSignal | undefined,
): AsyncGenerator<Buffer> {
  const source = writeSource(data);
  const readable =
    source instanceof Readable ? source : Readable.from(source, { objectMode: false });
  if (signal !== undefined) addAbortSignal(signal, readable);
  try {
    for await (const chunk of readable) {
      yield typeof chunk === "string"
        ? Buffer.from(chunk, "utf8")
        : Buffer.from(chunk as Uint8Array);
    }
  } catch (error) {
    throw sourceFailure(error, signal);
  } finally {
    readable.destroy();
  }
}

/**
 * Bodies of small single PUTs, kept by power-of-two capacity and used again once their PUT is
 * answered: a thousand 100 KiB files otherwise leave a thousand buffers for the collector, which
 * V8 lets pile up to tens of MiB outside its heap before it looks.
 */
const POOLED_BODY_MAX = 1024 * 1024;
const POOLED_BODIES_PER_SIZE = 32;
const pooledBodies = new Map<number, Buffer[]>();

export function takeBody(size: number): Buffer | undefined {
  if (size > POOLED_BODY_MAX) return undefined;
  const capacity = Math.max(4096, 2 ** Math.ceil(Math.log2(size + 1)));
  return pooledBodies.get(capacity)?.pop() ?? Buffer.allocUnsafeSlow(capacity);
}

export function releaseBody(body: Buffer | undefined): void {
  if (body === undefined) return;
  const free = pooledBodies.get(body.length) ?? [];
  if (free.length < POOLED_BODIES_PER_SIZE) free.push(body);
  pooledBodies.set(body.length, free);
}

/**
 * Reads a `ByteReader` payload of the announced size straight into one buffer (`pooled`, when
 * given, of at least the size and one byte more; no chunk copies), then checks that nothing
 * follows. A shorter payload is what it is; a longer one
 * comes back as `rest`, the bytes read so far followed by the remainder.
 */
export async function readExpected(
  reader: ByteReader,
  size: number,
  signal: AbortSignal | undefined,
  pooled?: Buffer,
): Promise<{ body: Buffer; rest?: AsyncIterable<Uint8Array> }> {
  // One byte more than announced tells a longer source at once.
  const space = pooled ?? Buffer.allocUnsafe(size + 1);
  const body = space.subarray(0, size);
  let filled = 0;
  try {
    while (filled < size) {
      const length = await reader.read(body.subarray(filled));
      if (length === 0) return { body: body.subarray(0, filled) };
      filled += length;
    }
    const probe = space.subarray(size, size + 1);
    const extra = await reader.read(probe);
    if (extra === 0) return { body };
    // The source goes on: its bytes are copied out of a pooled buffer, which goes back.
    const head = Buffer.from(space.subarray(0, size + 1));
    return { body: head.subarray(0, size), rest: continued([head], reader) };
  } catch (error) {
    throw sourceFailure(error, signal);
  }
}

async function* continued(head: Buffer[], reader: ByteReader): AsyncGenerator<Uint8Array> {
  yield* head;
  yield* writeSource(reader) as AsyncIterable<Uint8Array>;
}

function sourceFailure(error: unknown, signal: AbortSignal | undefined): SourceFailure {
  signal?.throwIfAborted();
  const message = error instanceof Error ? error.message : String(error);
  return new SourceFailure(`source stream failed: ${message}`, { cause: error });
}

/** Reads until `limit` bytes or the end; `done` when the payload ended first. */
export async function readUpTo(
  chunks: AsyncIterator<Buffer>,
  limit: number,
): Promise<{ bytes: Buffer; done: boolean }> {
  const collected: Buffer[] = [];
  let total = 0;
  while (total < limit) {
    const next = await chunks.next();
    if (next.done) return { bytes: Buffer.concat(collected, total), done: true };
    collected.push(next.value);
    total += next.value.length;
  }
  return { bytes: Buffer.concat(collected, total), done: false };
}

export async function* prepend(
  head: Buffer | undefined,
  rest: AsyncIterator<Buffer>,
): AsyncGenerator<Buffer> {
  if (head !== undefined && head.length > 0) yield head;
  for (;;) {
    const next = await rest.next();
    if (next.done) return;
    yield next.value;
  }
}

/**
 * Parts of `partSize` bytes (the last one shorter) read from a `ByteReader` without copies, into
 * buffers from `spare` when it has one.
 */
export async function* partsFromReader(
  reader: ByteReader,
  partSize: number,
  spare: Buffer[],
  signal: AbortSignal | undefined,
): AsyncGenerator<Buffer> {
  for (;;) {
    const part = spare.pop() ?? Buffer.allocUnsafe(partSize);
    let filled = 0;
    try {
      while (filled < partSize) {
        const length = await reader.read(part.subarray(filled));
        if (length === 0) break;
        filled += length;
      }
    } catch (error) {
      throw sourceFailure(error, signal);
    }
    if (filled > 0) yield filled === partSize ? part : part.subarray(0, filled);
    if (filled < partSize) return;
  }
}

/** Re-cuts a chunk stream into parts of exactly `partSize` bytes (the last may be shorter). */
export async function* partsOf(
  chunks: AsyncIterable<Buffer>,
  partSize: number,
): AsyncGenerator<Buffer> {
  let part = Buffer.allocUnsafe(partSize);
  let filled = 0;
  for await (const chunk of chunks) {
    let offset = 0;
    while (offset < chunk.length) {
      const copied = chunk.copy(
        part,
        filled,
        offset,
        offset + Math.min(partSize - filled, chunk.length - offset),
      );
      filled += copied;
      offset += copied;
      if (filled === partSize) {
        yield part;
        part = Buffer.allocUnsafe(partSize);
        filled = 0;
      }
    }
  }
  if (filled > 0) yield part.subarray(0, filled);
}
