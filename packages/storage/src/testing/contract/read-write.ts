import { createHash } from "node:crypto";
import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { readFileChunks } from "../../read-chunks.js";
import { bufferReader, type ContractContext, expectKind, patternChunks } from "./context.js";

/**
 * Reading and writing whole files: every payload kind (string, bytes, stream, iterable, `ByteReader`)
 * round-trips, a write is atomic (a failed one leaves the old bytes or nothing, never a partial
 * file or a temp name), overwrite and no-clobber behave, and parents are created.
 */
export function describeReadWrite(contract: ContractContext): void {
  const { backend, readText, files } = contract;
  describe("reading and writing", () => {
    it("round-trips a string as UTF-8", async () => {
      const text = "plain, accented é, check ✓, astral 😀\n";
      await backend().writeFile("notes/text.md", text);
      expect(await readText("notes/text.md")).toBe(text);
      expect((await backend().stat("notes/text.md")).size).toBe(Buffer.byteLength(text));
    });

    it("round-trips every byte value from a Uint8Array", async () => {
      const bytes = Uint8Array.from({ length: 512 }, (_, index) => (index * 7) % 256);
      await backend().writeFile("binary.bin", bytes);
      const read = await backend().readFile("binary.bin");
      expect(read).toBeInstanceOf(Uint8Array);
      expect(Buffer.from(read).equals(Buffer.from(bytes))).toBe(true);
    });

    it("round-trips a Readable of several chunks", async () => {
      const chunks = ["first chunk|", "second chunk|", "third"].map((text) => Buffer.from(text));
      await backend().writeFile("stream/readable.txt", Readable.from(chunks));
      expect(await readText("stream/readable.txt")).toBe("first chunk|second chunk|third");
    });

    it("writes a ByteReader payload in full and closes the reader", async () => {
      const size = 600 * 1024 + 5;
      const bytes = Buffer.alloc(size);
      for (let index = 0; index < size; index++) bytes[index] = (index * 13) % 256;
      const reader = bufferReader(bytes);
      await backend().writeFile("reader/blob.bin", reader);
      expect(reader.closed).toBe(true);
      expect(Buffer.from(await backend().readFile("reader/blob.bin")).equals(bytes)).toBe(true);
    });

    it("leaves no file and closes the reader when a ByteReader fails mid-file", async () => {
      const failure = new Error("source disk gone");
      const reader = bufferReader(Buffer.alloc(600 * 1024, 1), failure);
      const error = await backend()
        .writeFile("reader/failed.bin", reader)
        .then(
          () => undefined,
          (caught: unknown) => caught,
        );
      expect(error).toBeDefined();
      expect(String((error as Error).message)).toContain("source disk gone");
      expect(reader.closed).toBe(true);
      await expectKind(backend().stat("reader/failed.bin"), "not_found");
      expect(await files()).toEqual([]);
    });

    it("round-trips an async iterable of Uint8Array chunks", async () => {
      async function* source(): AsyncGenerator<Uint8Array> {
        yield new TextEncoder().encode("alpha ");
        yield new TextEncoder().encode("beta ");
        yield new TextEncoder().encode("gamma");
      }
      await backend().writeFile("stream/iterable.txt", source());
      expect(await readText("stream/iterable.txt")).toBe("alpha beta gamma");
    });

    it("streams a multi-megabyte file in and out unchanged", async () => {
      // Above 8 MiB: past the single-request threshold of remote stores, so multipart paths run.
      const size = 9 * 1024 * 1024 + 7;
      await backend().writeFile("large/blob.bin", patternChunks(size));
      const expected = createHash("sha256");
      for await (const chunk of patternChunks(size)) expected.update(chunk);
      const stream = await backend().openRead("large/blob.bin");
      const actual = createHash("sha256");
      let length = 0;
      for await (const chunk of stream) {
        actual.update(chunk as Uint8Array);
        length += (chunk as Uint8Array).length;
      }
      expect(length).toBe(size);
      expect(actual.digest("hex")).toBe(expected.digest("hex"));
      expect((await backend().stat("large/blob.bin")).size).toBe(size);
    });

    it("feeds a file to readFileChunks in order, chunk by chunk, as readFile reads it", async () => {
      // Several local chunks (256 KiB each) and an odd tail.
      const size = 3 * 256 * 1024 + 11;
      await backend().writeFile("chunks/blob.bin", patternChunks(size));
      const expected = Buffer.from(await backend().readFile("chunks/blob.bin"));
      const copies: Buffer[] = [];
      // A chunk is valid only during its call: keep copies.
      await readFileChunks(backend(), "chunks/blob.bin", (chunk) => {
        copies.push(Buffer.from(chunk));
        return undefined;
      });
      expect(Buffer.concat(copies).equals(expected)).toBe(true);
      const empty: number[] = [];
      await backend().writeFile("chunks/empty.txt", "");
      await readFileChunks(backend(), "chunks/empty.txt", (chunk) => void empty.push(chunk.length));
      expect(empty.reduce((sum, length) => sum + length, 0)).toBe(0);
    });

    it("stops readFileChunks when the consumer returns false, and rethrows its own error", async () => {
      await backend().writeFile("chunks/big.bin", patternChunks(2 * 1024 * 1024));
      let calls = 0;
      await readFileChunks(backend(), "chunks/big.bin", () => {
        calls++;
        return false;
      });
      expect(calls).toBe(1);
      const own = new Error("the consumer's own failure");
      await expect(
        readFileChunks(backend(), "chunks/big.bin", () => {
          throw own;
        }),
      ).rejects.toBe(own);
      await expectKind(
        readFileChunks(backend(), "chunks/missing.bin", () => undefined),
        "not_found",
      );
      await expectKind(
        readFileChunks(backend(), "../x", () => undefined),
        "invalid_path",
      );
    });

    it("writes and reads an empty file", async () => {
      await backend().writeFile("empty.txt", new Uint8Array(0));
      expect((await backend().readFile("empty.txt")).length).toBe(0);
      expect(await backend().stat("empty.txt")).toMatchObject({ kind: "file", size: 0 });
    });

    it("creates parent directories on write", async () => {
      await backend().writeFile("a/b/c/d.txt", "deep");
      expect(await backend().stat("a/b")).toMatchObject({ path: "a/b", kind: "directory" });
      expect(await readText("a/b/c/d.txt")).toBe("deep");
    });

    it("keeps stored bytes independent of the caller's buffers", async () => {
      const bytes = Buffer.from("original");
      await backend().writeFile("copy.txt", bytes);
      bytes.fill(0x78);
      const first = await backend().readFile("copy.txt");
      first.fill(0x79);
      expect(await readText("copy.txt")).toBe("original");
    });

    it("refuses to replace an existing file by default and keeps its bytes", async () => {
      await backend().writeFile("report.txt", "old bytes");
      await expectKind(backend().writeFile("report.txt", "new bytes"), "already_exists");
      const source = Readable.from([Buffer.from("streamed")]);
      await expectKind(
        backend().writeFile("report.txt", source, { overwrite: false }),
        "already_exists",
      );
      expect(await readText("report.txt")).toBe("old bytes");
      // The write owned the stream, so a refused write releases it.
      expect(source.destroyed).toBe(true);
    });

    it("replaces an existing file with overwrite: true", async () => {
      await backend().writeFile("report.txt", "a much longer original body");
      await backend().writeFile("report.txt", "short", { overwrite: true });
      expect(await readText("report.txt")).toBe("short");
      await backend().writeFile("report.txt", Readable.from([Buffer.from("streamed")]), {
        overwrite: true,
        contentType: "text/plain",
      });
      expect(await readText("report.txt")).toBe("streamed");
    });

    it("reports a missing file as not_found for readFile and openRead", async () => {
      await expectKind(backend().readFile("missing.txt"), "not_found");
      await expectKind(backend().openRead("missing.txt"), "not_found");
      await expectKind(backend().readFile("missing-dir/file.txt"), "not_found");
    });

    it("honours readFile maxBytes", async () => {
      await backend().writeFile("sized.txt", "0123456789");
      expect((await backend().readFile("sized.txt", { maxBytes: 10 })).length).toBe(10);
      await expectKind(backend().readFile("sized.txt", { maxBytes: 9 }), "limit_exceeded");
      await backend().writeFile("empty.txt", "");
      expect((await backend().readFile("empty.txt", { maxBytes: 0 })).length).toBe(0);
    });

    it("leaves no file behind when the source stream fails", async () => {
      async function* failing(): AsyncGenerator<Uint8Array> {
        yield Buffer.from("partial data");
        throw new Error("source broke");
      }
      await expect(backend().writeFile("broken/out.txt", failing())).rejects.toBeDefined();
      await expectKind(backend().stat("broken/out.txt"), "not_found");
      expect(await files()).toEqual([]);
    });

    it("reports a source that fails with a filesystem error as unavailable", async () => {
      // What a source file stream throws when its file is missing: it names the source, so it
      // must not be mistaken for a problem of the target (`not_found`, `permission`).
      const sourceError = Object.assign(new Error("ENOENT: no such file, open 'in.txt'"), {
        code: "ENOENT",
        errno: -2,
        syscall: "open",
        path: "in.txt",
      });
      async function* failing(): AsyncGenerator<Uint8Array> {
        yield Buffer.from("partial data");
        throw sourceError;
      }
      const error = await expectKind(backend().writeFile("out.txt", failing()), "unavailable");
      expect(error.path).toBe("out.txt");
      expect(await files()).toEqual([]);
    });

    it("reports a stream that fails before the write reads it, instead of crashing", async () => {
      // A file stream whose open fails errors on its own, maybe before the backend has
      // attached its pipeline; that error must reach the caller as the write's failure.
      const source = new Readable({ read() {} });
      setImmediate(() => source.destroy(new Error("source failed early")));
      const error = await expectKind(backend().writeFile("early.txt", source), "unavailable");
      expect(error.message).toContain("source failed early");
      expect(await files()).toEqual([]);
    });

    it("keeps the old bytes when a replacing stream fails", async () => {
      await backend().writeFile("keep.txt", "old bytes");
      async function* failing(): AsyncGenerator<Uint8Array> {
        yield Buffer.from("new partial");
        throw new Error("source broke");
      }
      await expect(
        backend().writeFile("keep.txt", failing(), { overwrite: true }),
      ).rejects.toBeDefined();
      expect(await readText("keep.txt")).toBe("old bytes");
      expect(await files()).toEqual(["keep.txt"]);
    });
  });
}
