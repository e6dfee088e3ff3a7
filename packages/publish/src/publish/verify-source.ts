import type { Readable } from "node:stream";
import { FileHasher } from "@distributor/bundle";
import type { ByteReader } from "@distributor/storage";

/** A copied source file whose bytes no longer match its manifest entry. */
export class SourceChangedError extends Error {
  override readonly name = "SourceChangedError";
}

/** What the manifest promised for one source file. */
export interface ExpectedSource {
  path: string;
  sha256: string;
  size: number;
}

/**
 * Yields a source file's chunks while hashing them, and fails once they differ from what the
 * manifest promised — so a source modified after validation never lands at a destination: the
 * write consuming these chunks fails before it commits. A generator rather than a `Transform`:
 * one stream less per copied file. The caller destroys `source` when the write is over.
 */
export async function* verifiedChunks(
  source: Readable,
  expected: ExpectedSource,
): AsyncGenerator<Uint8Array, void, undefined> {
  const hasher = new FileHasher();
  for await (const chunk of source as AsyncIterable<Uint8Array>) {
    hasher.update(chunk);
    if (hasher.size > expected.size) {
      throw changed(expected, `more than the ${expected.size} bytes listed in the manifest`);
    }
    yield chunk;
  }
  checkDigest(hasher, expected);
}

/**
 * The same check over a `ByteReader`: each read is hashed in the caller's buffer, a read past the
 * listed size fails, and the end of the file (a read of 0) fails unless size and sha256 match.
 * The reader vouches for that digest (`sha256`), so a destination need not hash the bytes again.
 */
export function verifyingReader(reader: ByteReader, expected: ExpectedSource): ByteReader {
  const hasher = new FileHasher();
  let ended = false;
  return {
    async read(into: Uint8Array): Promise<number> {
      if (ended) return 0;
      const length = await reader.read(into);
      if (length > 0) {
        hasher.update(into.subarray(0, length));
        if (hasher.size > expected.size) {
          throw changed(expected, `more than the ${expected.size} bytes listed in the manifest`);
        }
        return length;
      }
      ended = true;
      checkDigest(hasher, expected);
      return 0;
    },
    close: () => reader.close(),
    sha256: expected.sha256,
  };
}

function checkDigest(hasher: FileHasher, expected: ExpectedSource): void {
  const { sha256, size } = hasher.digest();
  if (size !== expected.size) {
    throw changed(expected, `size mismatch: expected ${expected.size}, got ${size}`);
  }
  if (sha256 !== expected.sha256) {
    throw changed(expected, `sha256 mismatch: expected ${expected.sha256}, got ${sha256}`);
  }
}

function changed(expected: ExpectedSource, problem: string): SourceChangedError {
  return new SourceChangedError(`${expected.path}: source changed while copying: ${problem}`);
}
