import { isUtf8 } from "node:buffer";
import type { Steps } from "@distributor/storage";
import type { PiecedJson, TextPieces } from "./json-slices.js";

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
): PiecedJson & { restart(): TextPieces } {
  const view = bufferOf(bytes);
  const bom = options.dropBom === true && UTF8_BOM.every((byte, index) => view[index] === byte);
  const first = bom ? UTF8_BOM.length : 0;
  const restart = (): TextPieces => {
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
