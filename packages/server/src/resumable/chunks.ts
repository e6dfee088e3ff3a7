// The bytes of a partial upload on S3 staging are chunk objects, each one complete when its PUT
// answered: `chunk-<offset>-<length>-<incarnation>-<writer>`. Several writers (a stalled request,
// its resume on another instance) may store the same bytes twice, or overlapping; what the
// partial holds is the contiguous coverage from 0 of its current incarnation's chunks, which those
// duplicates never change. Pure functions, no IO.

/** The most bytes one chunk object holds, and so the bytes one PATCH buffers in memory. */
export const CHUNK_BYTES = 8 * 1024 * 1024;

export interface Chunk {
  /** Object name below the partial's prefix. */
  name: string;
  start: number;
  end: number;
  /** The incarnation of the partial its writer wrote for (partial-store.ts, `PartialInfo`). */
  incarnation: string;
  /** Epoch ms of the object's LastModified, when listed. */
  modifiedAt?: number;
}

const OFFSET_DIGITS = 16;
const CHUNK_NAME = /^chunk-(\d{16})-(\d{1,16})-([a-z0-9]{1,16})-([a-z0-9]{1,32})$/;

export function chunkName(
  start: number,
  length: number,
  incarnation: string,
  writer: string,
): string {
  return `chunk-${String(start).padStart(OFFSET_DIGITS, "0")}-${length}-${incarnation}-${writer}`;
}

/** The chunk a name describes, or undefined for any other name (a declaration, a marker). */
export function parseChunk(name: string, modifiedAt?: number): Chunk | undefined {
  const match = CHUNK_NAME.exec(name);
  if (match === null) return undefined;
  const start = Number(match[1]);
  const length = Number(match[2]);
  if (!Number.isSafeInteger(start + length) || length === 0) return undefined;
  const chunk: Chunk = { name, start, end: start + length, incarnation: match[3] as string };
  if (modifiedAt !== undefined) chunk.modifiedAt = modifiedAt;
  return chunk;
}

/**
 * The most chunk objects a partial of `length` bytes may have: each PATCH and each cut adds at
 * least one, so a producer resuming a thousand times still fits; beyond it the partial is refused
 * more (a 4xx) rather than listed, held and read back without bound.
 */
export function maxPieces(length: number): number {
  return 2 * Math.ceil(length / CHUNK_BYTES) + 1024;
}

/** A chunk to read and the bytes of it to skip (already covered by the previous one). */
export interface CoverageStep {
  chunk: Chunk;
  skip: number;
}

/**
 * The contiguous coverage from 0, built one chunk at a time in ascending start order (the order
 * a LIST returns them in, the offsets being zero-padded): from 0, repeatedly the chunk starting at
 * or before the covered end that reaches furthest past it. Nothing but the steps is held.
 */
export class CoverageBuilder {
  covered = 0;
  readonly steps: CoverageStep[] = [];
  #best: Chunk | undefined;
  #gap = false;

  add(chunk: Chunk): void {
    if (this.#gap) return;
    if (chunk.start > this.covered) this.#take();
    if (chunk.start > this.covered) {
      // A gap: later chunks start later still, so nothing after it is contiguous from 0.
      this.#gap = true;
      return;
    }
    if (chunk.end > this.covered && (this.#best === undefined || chunk.end > this.#best.end)) {
      this.#best = chunk;
    }
  }

  finish(): { covered: number; steps: CoverageStep[] } {
    if (!this.#gap) this.#take();
    return { covered: this.covered, steps: this.steps };
  }

  #take(): void {
    const best = this.#best;
    if (best === undefined || best.end <= this.covered) return;
    this.steps.push({ chunk: best, skip: this.covered - best.start });
    this.covered = best.end;
    this.#best = undefined;
  }
}

/** The coverage of chunks in any order (sorted first). */
export function coverage(chunks: readonly Chunk[]): { covered: number; steps: CoverageStep[] } {
  const sorted = [...chunks].sort((a, b) => a.start - b.start || b.end - a.end);
  const builder = new CoverageBuilder();
  for (const chunk of sorted) builder.add(chunk);
  return builder.finish();
}
