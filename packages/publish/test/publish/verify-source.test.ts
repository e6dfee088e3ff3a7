import { createHash } from "node:crypto";
import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { SourceChangedError, verifiedChunks } from "../../src/publish/verify-source.js";

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
