import { randomBytes } from "node:crypto";
import { brotliDecompressSync, gunzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import {
  EncodingMismatchError,
  encodeBytes,
  encodedDigest,
  encodeStream,
  verifiedEncoding,
} from "../../src/content/encode.js";

/** Some compressible bytes: text with random words, a few hundred KiB. */
const INPUT = Buffer.from(
  Array.from({ length: 20_000 }, () => `word-${randomBytes(2).toString("hex")} `).join(""),
);

async function* chunked(bytes: Uint8Array, sizes: readonly number[]): AsyncGenerator<Uint8Array> {
  let offset = 0;
  for (let index = 0; offset < bytes.length; index++) {
    const size = sizes[index % sizes.length] as number;
    yield bytes.subarray(offset, offset + size);
    offset += size;
  }
}

async function collect(stream: AsyncIterable<unknown>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of stream) parts.push(part as Buffer);
  return Buffer.concat(parts);
}

describe.each(["gzip", "br"] as const)("%s encoding", (encoding) => {
  it("gives the same bytes however the input is cut into chunks", async () => {
    const whole = await encodeBytes(INPUT, encoding);
    const decode = encoding === "gzip" ? gunzipSync : brotliDecompressSync;
    expect(decode(whole).equals(INPUT)).toBe(true);
    for (const sizes of [[1], [7, 65_536, 3], [100_000], [65_536]]) {
      const cut = await collect(encodeStream(chunked(INPUT, sizes), encoding));
      expect(cut.equals(whole), `chunks of ${sizes.join(", ")}`).toBe(true);
    }
    expect(await encodedDigest(chunked(INPUT, [4096]), encoding)).toEqual({
      sha256: expect.stringMatching(/^sha256:[0-9a-f]{64}$/),
      size: whole.length,
    });
  });

  it("fails a write whose encoded bytes are not the planned ones", async () => {
    const digest = await encodedDigest(chunked(INPUT, [8192]), encoding);
    const other = Buffer.concat([INPUT, Buffer.from("!")]);
    await expect(
      collect(
        verifiedEncoding(encodeStream(chunked(other, [8192]), encoding), {
          path: "page.html",
          ...digest,
        }),
      ),
    ).rejects.toThrow(EncodingMismatchError);
    const same = await collect(
      verifiedEncoding(encodeStream(chunked(INPUT, [1000]), encoding), {
        path: "page.html",
        ...digest,
      }),
    );
    expect(same.length).toBe(digest.size);
  });

  it("fails the encoded stream when its input fails", async () => {
    async function* broken(): AsyncGenerator<Uint8Array> {
      yield INPUT.subarray(0, 1000);
      throw new Error("source changed while copying");
    }
    await expect(collect(encodeStream(broken(), encoding))).rejects.toThrow(
      "source changed while copying",
    );
  });
});
