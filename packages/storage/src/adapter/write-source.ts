import { Readable } from "node:stream";
import type { ByteReader, WriteData } from "../backend.js";
import { releaseChunkBuffer, takeChunkBuffer } from "./chunk-buffers.js";

/** Something `stream.pipeline` accepts as its source. */
export type WriteSource = Iterable<Uint8Array> | AsyncIterable<Uint8Array> | Readable;

/**
 * A `ByteReader` payload: an object with `read` and `close` that is neither a stream nor an
 * iterable (a `Readable` has a `read` method too, of another kind).
 */
export function isByteReader(data: WriteData): data is ByteReader {
  return (
    typeof data === "object" &&
    !(data instanceof Uint8Array) &&
    !(data instanceof Readable) &&
    !(Symbol.asyncIterator in data) &&
    typeof (data as Partial<ByteReader>).read === "function" &&
    typeof (data as Partial<ByteReader>).close === "function"
  );
}

/**
 * Turns every accepted write payload into a pipeline source; strings are UTF-8. A `ByteReader`
 * becomes chunks in fresh buffers of exactly the bytes read, which a backend may keep (a part
 * being assembled, a request in flight); it is closed when the chunks end or the consumer stops.
 */
export function writeSource(data: WriteData): WriteSource {
  if (typeof data === "string") return [Buffer.from(data, "utf8")];
  if (data instanceof Uint8Array) return [data];
  if (isByteReader(data)) return readerChunks(data);
  return data;
}

async function* readerChunks(reader: ByteReader): AsyncGenerator<Uint8Array> {
  // Read into a reused buffer, then copied out at its length: a 100 KiB file costs 100 KiB, not
  // a 256 KiB chunk mostly unused.
  const buffer = takeChunkBuffer();
  try {
    for (;;) {
      const length = await reader.read(buffer);
      if (length === 0) return;
      yield Buffer.from(buffer.subarray(0, length));
    }
  } finally {
    releaseChunkBuffer(buffer);
    reader.close();
  }
}

/**
 * A write takes ownership of a stream source: when it fails before (or while) consuming it, the
 * stream is destroyed so an open file or socket behind it is released, as `pipeline` would do.
 * (A `ByteReader` is closed by the frame after every write, whatever the outcome.)
 */
export function releaseSource(data: WriteData): void {
  const destroy = (data as { destroy?: unknown }).destroy;
  if (typeof destroy === "function") destroy.call(data);
}

/**
 * A stream handed to a write may fail before the backend starts reading it (a file stream whose
 * open fails, a transform that rejects its input). Without a listener that error would crash the
 * process; with this one it stays on the stream, and the write's pipeline reports it.
 */
export function holdSourceErrors(data: WriteData): void {
  const on = (data as { on?: unknown }).on;
  if (typeof on === "function") on.call(data, "error", ignore);
}

function ignore(): void {}
