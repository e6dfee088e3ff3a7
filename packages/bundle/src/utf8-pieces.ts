import { isUtf8 } from "node:buffer";
import { TextDecoder } from "node:util";
import { SliceClock, type Steps } from "@distributor/storage";
import type { PiecedJson, ReadyPieces, TextPieces } from "./json-slices.js";

/** Bytes decoded per piece, and checked per step. */
const PIECE_BYTES = 1024 * 1024;

const UTF8_BOM = [0xef, 0xbb, 0xbf] as const;

/**
 * Whether `bytes` are UTF-8 (what a fatal `TextDecoder` accepts), checked a megabyte per step so
 * that a big file does not hold the event loop. Chunks end before a character's first byte.
 */
export function* isUtf8Steps(bytes: Uint8Array): Steps<boolean> {
  const view = bufferOf(bytes);
  for (let start = 0; start < view.length; ) {
    const end = pieceEnd(view, start);
    if (end === start || !isUtf8(view.subarray(start, end))) return false;
    start = end;
    yield;
  }
  return true;
}

/**
 * UTF-8 bytes, already checked (`isUtf8Steps`), as text handed over a piece at a time: a reader
 * of a big file never holds it as one string, only the bytes. `dropBom` leaves out a leading byte
 * order mark (as a `TextDecoder` does by default); otherwise it is the text's first character.
 * `pieces()` starts again from the first byte on every call; `whole()` is the whole text.
 */
export function utf8Pieces(
  bytes: Uint8Array,
  options: { dropBom?: boolean } = {},
): PiecedJson & { restart(): ReadyPieces } {
  const view = bufferOf(bytes);
  const bom = options.dropBom === true && UTF8_BOM.every((byte, index) => view[index] === byte);
  const first = bom ? UTF8_BOM.length : 0;
  const restart = (): ReadyPieces => {
    let at = first;
    return {
      next() {
        if (at >= view.length) return undefined;
        const end = pieceEnd(view, at);
        const piece = view.toString("utf8", at, end);
        at = end;
        return piece;
      },
    };
  };
  return { pieces: restart(), restart, whole: () => view.toString("utf8", first) };
}

/** The end of the piece starting at `start`: `PIECE_BYTES` on, moved back before a character's first byte. */
function pieceEnd(view: Buffer, start: number): number {
  let end = Math.min(view.length, start + PIECE_BYTES);
  while (end < view.length && end > start && ((view[end] ?? 0) & 0xc0) === 0x80) end--;
  return end;
}

function bufferOf(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** Bytes a streamed source reads at a time. */
const STREAM_CHUNK_BYTES = 1024 * 1024;

/**
 * UTF-8 text read from a reader of bytes a piece at a time: only the pieces not yet parsed are
 * held, never the file. `next()` answers null while no piece is ready; the driver
 * (`runWithStreamedPieces`) then awaits `load()` before resuming the parse. Bytes that are not
 * UTF-8 fail the load with a `TypeError`, as a fatal `TextDecoder` does. `keepBom` keeps a
 * leading byte order mark in the text (a `TextDecoder` drops it by default); `onBytes` sees every
 * byte read, in order (a digest of the file, say).
 */
export class StreamedUtf8Pieces implements TextPieces {
  readonly #decoder: TextDecoder;
  readonly #ready: string[] = [];
  readonly #chunk = Buffer.allocUnsafe(STREAM_CHUNK_BYTES);
  #ended = false;
  #starved = false;

  constructor(
    private readonly reader: { read(into: Uint8Array): Promise<number> },
    private readonly options: { keepBom?: boolean; onBytes?: (bytes: Uint8Array) => void } = {},
  ) {
    this.#decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: options.keepBom === true });
  }

  next(): string | undefined | null {
    const piece = this.#ready.shift();
    if (piece !== undefined) return piece;
    if (this.#ended) return undefined;
    this.#starved = true;
    return null;
  }

  /** True when the parse asked for a piece that was not there: `load()` reads one. */
  get starved(): boolean {
    return this.#starved;
  }

  /** Reads the next chunk of bytes and decodes it; at the end of the file, marks the end. */
  async load(): Promise<void> {
    this.#starved = false;
    const length = await this.reader.read(this.#chunk);
    if (length === 0) {
      const tail = this.#decoder.decode();
      if (tail !== "") this.#ready.push(tail);
      this.#ended = true;
      return;
    }
    const bytes = this.#chunk.subarray(0, length);
    this.options.onBytes?.(bytes);
    const text = this.#decoder.decode(bytes, { stream: true });
    if (text !== "") this.#ready.push(text);
  }
}

/**
 * Runs parse steps that read `pieces`, loading a piece whenever the parse waits for one and
 * otherwise letting the event loop turn between slices, as `runInSlices` does.
 */
export async function runWithStreamedPieces<T>(
  steps: Steps<T>,
  pieces: StreamedUtf8Pieces,
): Promise<T> {
  const clock = new SliceClock();
  for (;;) {
    const next = steps.next();
    if (next.done) return next.value;
    // A load may not wait at all (a local read is a blocking call): the clock is checked anyway.
    if (pieces.starved) await pieces.load();
    if (clock.due()) await clock.turn();
  }
}

/**
 * Thrown by the `whole()` of a streamed text: the text was not read in slices (it is not valid
 * JSON, say), and the caller reads the file again whole for the parser's own verdict.
 */
export class WholeTextNeeded extends Error {
  constructor() {
    super("the text must be read whole");
  }
}
