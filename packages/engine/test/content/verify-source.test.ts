import { createHash } from "node:crypto";
import { Readable } from "node:stream";
import type { ByteReader } from "@distributor/storage";
import { describe, expect, it } from "vitest";
import {
  SourceChangedError,
  verifiedChunks,
  verifyingReader,
} from "../../src/content/verify-source.js";

const sha256 = (text: string) => `sha256:${createHash("sha256").update(text).digest("hex")}`;

async function drain(source: Readable, expected: { sha256: string; size: number }) {
  const seen: string[] = [];
  for await (const chunk of verifiedChunks(source, { path: "r.txt", ...expected })) {
    seen.push(Buffer.from(chunk).toString("utf8"));
  }
  return seen;
}

const chunks = (...texts: string[]) => Readable.from(texts.map((text) => Buffer.from(text)));

describe("verifiedChunks", () => {
  it("passes every chunk of the promised bytes through, in order", async () => {
    const seen = await drain(chunks("ab", "cd", "e"), { sha256: sha256("abcde"), size: 5 });
    expect(seen).toEqual(["ab", "cd", "e"]);
  });

  it("fails before yielding a chunk that passes the listed size", async () => {
    const seen: string[] = [];
    const iterate = async () => {
      for await (const chunk of verifiedChunks(chunks("ab", "cdef"), {
        path: "r.txt",
        sha256: sha256("abcd"),
        size: 4,
      })) {
        seen.push(Buffer.from(chunk).toString("utf8"));
      }
    };
    await expect(iterate()).rejects.toThrow(
      "r.txt: source changed while copying: more than the 4 bytes listed in the manifest",
    );
    expect(seen).toEqual(["ab"]);
  });

  it("fails on fewer bytes than listed, and on other bytes of the listed size", async () => {
    await expect(drain(chunks("abc"), { sha256: sha256("abcd"), size: 4 })).rejects.toThrow(
      "r.txt: source changed while copying: size mismatch: expected 4, got 3",
    );
    const error = await drain(chunks("abce"), { sha256: sha256("abcd"), size: 4 }).catch(
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(SourceChangedError);
    expect((error as Error).message).toBe(
      `r.txt: source changed while copying: sha256 mismatch: expected ${sha256("abcd")}, got ${sha256("abce")}`,
    );
  });

  it("passes the source's own failure through", async () => {
    const failure = new Error("disk gone");
    const source = new Readable({
      read() {
        this.destroy(failure);
      },
    });
    await expect(drain(source, { sha256: sha256(""), size: 0 })).rejects.toBe(failure);
  });
});

describe("verifyingReader", () => {
  /** A reader over `text`, `step` bytes per read. */
  const textReader = (text: string, step = 2) => {
    const bytes = Buffer.from(text);
    let offset = 0;
    let closed = false;
    return {
      async read(into: Uint8Array) {
        const length = Math.min(step, into.length, bytes.length - offset);
        into.set(bytes.subarray(offset, offset + length));
        offset += length;
        return length;
      },
      close() {
        closed = true;
      },
      get closed() {
        return closed;
      },
    };
  };

  async function readAll(reader: ByteReader): Promise<string> {
    const parts: Buffer[] = [];
    const into = new Uint8Array(8);
    for (;;) {
      const length = await reader.read(into);
      if (length === 0) return Buffer.concat(parts).toString("utf8");
      parts.push(Buffer.from(into.subarray(0, length)));
    }
  }

  it("reads the promised bytes through, ends with 0 and closes the source reader", async () => {
    const source = textReader("abcde");
    const reader = verifyingReader(source, { path: "r.txt", sha256: sha256("abcde"), size: 5 });
    // It names the digest it enforces, so a destination need not hash the bytes again.
    expect(reader.verifiesSha256).toBe(sha256("abcde"));
    expect(await readAll(reader)).toBe("abcde");
    expect(await reader.read(new Uint8Array(4))).toBe(0);
    reader.close();
    expect(source.closed).toBe(true);
  });

  it("fails a read past the listed size, and an end with other bytes or fewer", async () => {
    const expected = { path: "r.txt", sha256: sha256("abcd"), size: 4 };
    await expect(readAll(verifyingReader(textReader("abcdef"), expected))).rejects.toThrow(
      "r.txt: source changed while copying: more than the 4 bytes listed in the manifest",
    );
    await expect(readAll(verifyingReader(textReader("abc"), expected))).rejects.toThrow(
      "r.txt: source changed while copying: size mismatch: expected 4, got 3",
    );
    await expect(readAll(verifyingReader(textReader("abce"), expected))).rejects.toThrow(
      `r.txt: source changed while copying: sha256 mismatch: expected ${sha256("abcd")}, got ${sha256("abce")}`,
    );
  });

  it("keeps failing once a check failed: a consumer reading on never sees a clean end", async () => {
    const expected = { path: "r.txt", sha256: sha256("abcd"), size: 4 };
    for (const text of ["abce", "abcdef"]) {
      const reader = verifyingReader(textReader(text), expected);
      await expect(readAll(reader)).rejects.toThrow("source changed while copying");
      await expect(reader.read(new Uint8Array(8))).rejects.toThrow("source changed while copying");
      await expect(reader.read(new Uint8Array(8))).rejects.toThrow("source changed while copying");
    }
  });
});
