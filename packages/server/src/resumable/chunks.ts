// The bytes of a partial upload on S3 staging are chunk objects, each one complete when its PUT
// answered: `chunk-<offset>-<length>-<writer>`. Several writers (a stalled request, its resume on
// another instance) may store the same bytes twice, or overlapping; what the partial holds is the
// contiguous coverage from 0, which those duplicates never change. Pure functions, no IO.

/** The most bytes one chunk object holds, and so the bytes one PATCH buffers in memory. */
export const CHUNK_BYTES = 8 * 1024 * 1024;

export interface Chunk {
  /** Object name below the partial's prefix. */
  name: string;
  start: number;
  end: number;
  /** Epoch ms of the object's LastModified, when listed. */
  modifiedAt?: number;
}

const OFFSET_DIGITS = 16;
const CHUNK_NAME = /^chunk-(\d{16})-(\d{1,16})-([a-z0-9]{1,32})$/;

export function chunkName(start: number, length: number, writer: string): string {
  return `chunk-${String(start).padStart(OFFSET_DIGITS, "0")}-${length}-${writer}`;
}

/** The chunk a name describes, or undefined for any other name (a declaration, a marker). */
export function parseChunk(name: string, modifiedAt?: number): Chunk | undefined {
  const match = CHUNK_NAME.exec(name);
  if (match === null) return undefined;
  const start = Number(match[1]);
  const length = Number(match[2]);
  if (!Number.isSafeInteger(start + length) || length === 0) return undefined;
  return { name, start, end: start + length, ...(modifiedAt === undefined ? {} : { modifiedAt }) };
}

/** A chunk to read and the bytes of it to skip (already covered by the previous one). */
export interface CoverageStep {
  chunk: Chunk;
  skip: number;
}

/**
 * The contiguous bytes the chunks hold from 0, and the chunks that hold them in order: from 0,
 * repeatedly the chunk starting at or before the covered end that reaches furthest past it.
 */
export function coverage(chunks: readonly Chunk[]): { covered: number; steps: CoverageStep[] } {
  const sorted = [...chunks].sort((a, b) => a.start - b.start || b.end - a.end);
  const steps: CoverageStep[] = [];
  let covered = 0;
  let index = 0;
  let best: Chunk | undefined;
  for (;;) {
    while (index < sorted.length && (sorted[index] as Chunk).start <= covered) {
      const candidate = sorted[index] as Chunk;
      if (candidate.end > covered && (best === undefined || candidate.end > best.end)) {
        best = candidate;
      }
      index += 1;
    }
    if (best === undefined || best.end <= covered) break;
    steps.push({ chunk: best, skip: covered - best.start });
    covered = best.end;
    best = undefined;
  }
  return { covered, steps };
}
