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
 * It says so (`verifiesSha256`), so a destination need not hash the bytes again; a failed check
 * fails every later read too.
 */
export function verifyingReader(reader: ByteReader, expected: ExpectedSource): ByteReader {
  const hasher = new FileHasher();
  let ended = false;
  let failure: SourceChangedError | undefined;
  const fail = (problem: string): never => {
    failure = changed(expected, problem);
    throw failure;
  };
  return {
    async read(into: Uint8Array): Promise<number> {
      // A consumer reading on after a failed check must not see a clean end of the file.
      if (failure !== undefined) throw failure;
      if (ended) return 0;
      const length = await reader.read(into);
      if (length > 0) {
        hasher.update(into.subarray(0, length));
        if (hasher.size > expected.size) {
          fail(`more than the ${expected.size} bytes listed in the manifest`);
        }
        return length;
      }
      const problem = digestProblem(hasher, expected);
      if (problem !== undefined) fail(problem);
      ended = true;
      return 0;
    },
    close: () => reader.close(),
    verifiesSha256: expected.sha256,
  };
}

function checkDigest(hasher: FileHasher, expected: ExpectedSource): void {
  const problem = digestProblem(hasher, expected);
  if (problem !== undefined) throw changed(expected, problem);
}

function digestProblem(hasher: FileHasher, expected: ExpectedSource): string | undefined {
  const { sha256, size } = hasher.digest();
  if (size !== expected.size) return `size mismatch: expected ${expected.size}, got ${size}`;
  if (sha256 !== expected.sha256) {
    return `sha256 mismatch: expected ${expected.sha256}, got ${sha256}`;
  }
  return undefined;
}

function changed(expected: ExpectedSource, problem: string): SourceChangedError {
  return new SourceChangedError(`${expected.path}: source changed while copying: ${problem}`);
}
