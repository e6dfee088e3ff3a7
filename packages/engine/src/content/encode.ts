import type { Readable } from "node:stream";
import { pipeline } from "node:stream";
import { constants, createBrotliCompress, createGzip } from "node:zlib";
import { FileHasher } from "@distributor/bundle";
import type { ContentEncoding } from "./metadata.js";

/**
 * Bytes go into the encoder in blocks of exactly this size (the last one shorter): what the
 * compressor emits may depend on how its input was split, and the encoded digest planned must be
 * the digest of the bytes written, whatever chunks the source backend happens to deliver.
 */
const ENCODER_BLOCK = 64 * 1024;

/** The encoder of `encoding`, with fixed settings: the same input always gives the same bytes. */
function createEncoder(encoding: ContentEncoding) {
  return encoding === "gzip"
    ? createGzip({ level: 9 })
    : createBrotliCompress({
        params: {
          [constants.BROTLI_PARAM_QUALITY]: 11,
          [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_GENERIC,
        },
      });
}

/** Re-cuts a byte stream into blocks of `ENCODER_BLOCK` bytes, copying only partial blocks. */
async function* blocks(chunks: AsyncIterable<Uint8Array>): AsyncGenerator<Buffer> {
  let pending: Buffer[] = [];
  let pendingSize = 0;
  for await (const chunk of chunks) {
    let view = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    while (view.length > 0) {
      if (pendingSize === 0 && view.length >= ENCODER_BLOCK) {
        // A whole block in one piece: one copy, no concatenation.
        yield Buffer.from(view.subarray(0, ENCODER_BLOCK));
        view = view.subarray(ENCODER_BLOCK);
        continue;
      }
      const take = Math.min(ENCODER_BLOCK - pendingSize, view.length);
      // Copied: a producer may reuse its chunk buffers once the next one is asked for.
      pending.push(Buffer.from(view.subarray(0, take)));
      pendingSize += take;
      view = view.subarray(take);
      if (pendingSize === ENCODER_BLOCK) {
        yield Buffer.concat(pending, pendingSize);
        pending = [];
        pendingSize = 0;
      }
    }
  }
  if (pendingSize > 0) yield Buffer.concat(pending, pendingSize);
}

/**
 * `chunks` compressed with `encoding`, as a stream: bounded memory (the encoder's backpressure),
 * and a failure of the input (a source that changed while read) fails the output.
 */
export function encodeStream(
  chunks: AsyncIterable<Uint8Array>,
  encoding: ContentEncoding,
): Readable {
  const encoder = createEncoder(encoding);
  // The callback only swallows what iterating the encoder reports anyway.
  pipeline(blocks(chunks), encoder, () => undefined);
  return encoder;
}

/** Digest and size of `chunks` compressed with `encoding`, without keeping the encoded bytes. */
export async function encodedDigest(
  chunks: AsyncIterable<Uint8Array>,
  encoding: ContentEncoding,
): Promise<{ sha256: string; size: number }> {
  const hasher = new FileHasher();
  for await (const chunk of encodeStream(chunks, encoding)) hasher.update(chunk as Uint8Array);
  return hasher.digest();
}

/** `bytes` compressed with `encoding`, in memory (rendered HTML, which is in memory already). */
export async function encodeBytes(bytes: Uint8Array, encoding: ContentEncoding): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const chunk of encodeStream(once(bytes), encoding)) parts.push(chunk as Buffer);
  return Buffer.concat(parts);
}

async function* once(bytes: Uint8Array): AsyncGenerator<Uint8Array> {
  yield bytes;
}

/** Encoded bytes that differ from what planning computed: the write is refused. */
export class EncodingMismatchError extends Error {
  override readonly name = "EncodingMismatchError";
}

/**
 * Passes encoded chunks on while hashing them, and fails at the end unless they are exactly the
 * planned bytes: the state records the planned digest, so a write of anything else must not land.
 */
export async function* verifiedEncoding(
  encoded: AsyncIterable<Uint8Array>,
  expected: { path: string; sha256: string; size: number },
): AsyncGenerator<Uint8Array> {
  const hasher = new FileHasher();
  for await (const chunk of encoded) {
    hasher.update(chunk);
    if (hasher.size > expected.size) break;
    yield chunk;
  }
  const { sha256, size } = hasher.digest();
  if (sha256 !== expected.sha256 || size !== expected.size) {
    throw new EncodingMismatchError(
      `${expected.path}: encoding gave ${size} bytes with ${sha256}, but ${expected.size} bytes with ${expected.sha256} were planned`,
    );
  }
}
