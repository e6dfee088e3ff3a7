import type { Readable } from "node:stream";
import { FileHasher } from "@distributor/bundle";

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
