import { describe, expect, it } from "vitest";
import { parseJsonPiecesSteps } from "../src/json-slices.js";
import {
  runWithStreamedPieces,
  StreamedUtf8Pieces,
  utf8Pieces,
  WholeTextNeeded,
} from "../src/utf8-pieces.js";

/** A reader handing out `bytes` at most `step` bytes per read, counting the reads. */
function readerOf(bytes: Uint8Array, step: number) {
  let at = 0;
  const reader = {
    reads: 0,
    async read(into: Uint8Array): Promise<number> {
      reader.reads++;
      const length = Math.min(into.length, step, bytes.length - at);
      into.set(bytes.subarray(at, at + length));
      at += length;
      return length;
    },
  };
  return reader;
}

const whole = () => {
  throw new WholeTextNeeded();
};

describe("StreamedUtf8Pieces", () => {
  const value = {
    outputs: Array.from({ length: 4000 }, (_, index) => ({
      path: `dir/é${index}/ファイル-${index}.txt`,
      size: index,
    })),
    tail: "𝄞 end",
  };
  const bytes = Buffer.from(JSON.stringify(value), "utf8");

  it("parses what JSON.parse gives, characters cut across reads included, a read at a time", async () => {
    for (const step of [1 << 20, 7, 4093]) {
      const reader = readerOf(bytes, step);
      const pieces = new StreamedUtf8Pieces(reader);
      const parsed = await runWithStreamedPieces(
        parseJsonPiecesSteps({ pieces, whole }, 1024),
        pieces,
      );
      expect(parsed).toEqual(value);
      // Every byte read once, a read per step of bytes and one that finds the end.
      expect(reader.reads).toBe(Math.ceil(bytes.length / step) + 1);
    }
  });

  it("sees every byte in order, and keeps or drops a byte order mark as asked", async () => {
    const marked = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"a":1}')]);
    const seen: Buffer[] = [];
    const kept = new StreamedUtf8Pieces(readerOf(marked, 2), {
      keepBom: true,
      onBytes: (chunk) => seen.push(Buffer.from(chunk)),
    });
    const steps = parseJsonPiecesSteps({ pieces: kept, whole: () => "\ufeff{}" });
    await expect(runWithStreamedPieces(steps, kept)).rejects.toThrow(SyntaxError);
    expect(Buffer.concat(seen)).toEqual(marked);
    const dropped = new StreamedUtf8Pieces(readerOf(marked, 2));
    const value = await runWithStreamedPieces(
      parseJsonPiecesSteps({ pieces: dropped, whole }),
      dropped,
    );
    expect(value).toEqual({ a: 1 });
  });

  it("reads a valid text ending in megabytes of whitespace, and refuses anything after it", async () => {
    const spaces = " \n".repeat(3 * 1024 * 1024);
    const padded = new StreamedUtf8Pieces(readerOf(Buffer.from(`{"a":[1,2]}${spaces}`), 65_536));
    const steps = parseJsonPiecesSteps({ pieces: padded, whole }, 16);
    expect(await runWithStreamedPieces(steps, padded)).toEqual({ a: [1, 2] });
    const trailing = new StreamedUtf8Pieces(readerOf(Buffer.from(`{"a":1}${spaces}x`), 65_536));
    const refused = parseJsonPiecesSteps({ pieces: trailing, whole }, 16);
    await expect(runWithStreamedPieces(refused, trailing)).rejects.toThrow(WholeTextNeeded);
  });

  it("fails bytes that are not UTF-8 with a TypeError", async () => {
    const pieces = new StreamedUtf8Pieces(readerOf(new Uint8Array([0x7b, 0xff, 0x7d]), 1));
    const steps = parseJsonPiecesSteps({ pieces, whole });
    await expect(runWithStreamedPieces(steps, pieces)).rejects.toThrow(TypeError);
  });

  it("asks for the whole text when a text cannot be read in slices", async () => {
    const pieces = new StreamedUtf8Pieces(readerOf(Buffer.from('{"a":[1,2'), 3));
    const steps = parseJsonPiecesSteps({ pieces, whole }, 4);
    await expect(runWithStreamedPieces(steps, pieces)).rejects.toThrow(WholeTextNeeded);
  });
});

describe("utf8Pieces", () => {
  it("gives the text again from its start on every restart, and drops a byte order mark when asked", () => {
    const text = `${"x".repeat(3 * 1024 * 1024)}é${"y".repeat(10)}`;
    const bytes = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(text)]);
    const read = (pieces: { next(): string | undefined }) => {
      const parts: string[] = [];
      for (let piece = pieces.next(); piece !== undefined; piece = pieces.next()) parts.push(piece);
      return { parts: parts.length, text: parts.join("") };
    };
    const dropped = utf8Pieces(bytes, { dropBom: true });
    expect(read(dropped.restart())).toEqual({ parts: 4, text });
    expect(read(dropped.restart()).text).toBe(text);
    expect(dropped.whole()).toBe(text);
    expect(utf8Pieces(bytes).whole()).toBe(`\ufeff${text}`);
  });
});
