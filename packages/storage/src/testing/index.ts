import { createHash } from "node:crypto";
import { Readable } from "node:stream";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { ByteReader, StorageBackend, StorageEntry } from "../backend.js";
import { isStorageError, type StorageError, type StorageErrorKind } from "../errors.js";
import { readFileChunks } from "../read-chunks.js";

/** A fresh, empty backend for one test, and how to dispose of what it used. */
export interface BackendFixture {
  backend: StorageBackend;
  /** Runs after `backend.close()`, e.g. to remove a temp directory or stop a server. */
  cleanup?: () => Promise<void>;
}

export type BackendFactory = () => Promise<BackendFixture> | BackendFixture;

/**
 * Registers the behaviour every `StorageBackend` must share as vitest tests. Call it at the top
 * level of a test file; `factory` runs before each test and must return an empty backend.
 */
/** What a backend's semantics allow the contract to expect beyond the common ground. */
export interface BackendCapabilities {
  /**
   * Version tokens derive from the content (S3 ETags), so writing the same bytes again yields the
   * same version. Compare-and-swap stays safe: a state replaced by identical bytes plans the same.
   */
  contentDerivedVersions?: boolean;
}

export function describeBackendContract(
  name: string,
  factory: BackendFactory,
  capabilities: BackendCapabilities = {},
): void {
  describe(`${name} backend contract`, () => {
    let fixture: BackendFixture | undefined;
    const backend = (): StorageBackend => {
      if (!fixture) throw new Error("the backend fixture is not ready");
      return fixture.backend;
    };

    beforeEach(async () => {
      fixture = await factory();
    });

    afterEach(async () => {
      const current = fixture;
      fixture = undefined;
      if (!current) return;
      try {
        await current.backend.close();
      } finally {
        await current.cleanup?.();
      }
    });

    const put = async (files: Record<string, string>): Promise<void> => {
      for (const [path, text] of Object.entries(files)) await backend().writeFile(path, text);
    };
    const readText = async (path: string): Promise<string> =>
      Buffer.from(await backend().readFile(path)).toString("utf8");
    const tree = async (prefix = ""): Promise<string[]> =>
      summarize(await backend().walk(prefix, { recursive: true, limit: 1000 }));
    const files = async (): Promise<string[]> =>
      (await backend().walk("", { recursive: true, limit: 1000 }))
        .filter((entry) => entry.kind === "file")
        .map((entry) => entry.path);

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
        await readFileChunks(
          backend(),
          "chunks/empty.txt",
          (chunk) => void empty.push(chunk.length),
        );
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

    describe("versions and conditional writes", () => {
      it("reports one version for a file through write, stat, walk and readVersioned", async () => {
        const { version } = await backend().writeFile("state/.distributor.json", "{}\n");
        expect(typeof version).toBe("string");
        expect(version).not.toBe("");
        expect((await backend().stat("state/.distributor.json")).version).toBe(version);
        const listed = await backend().walk("state", { limit: 10 });
        expect(listed.map((entry) => entry.version)).toEqual([version]);
        const read = await backend().readVersioned("state/.distributor.json");
        expect(read.version).toBe(version);
        expect(Buffer.from(read.bytes).toString("utf8")).toBe("{}\n");
      });

      it("gives every replacement a new version (with the same bytes too, unless content-derived)", async () => {
        const first = await backend().writeFile("v.txt", "same");
        const second = await backend().writeFile("v.txt", "same", { overwrite: true });
        const third = await backend().writeFile("v.txt", "other", { overwrite: true });
        expect(third.version).not.toBe(second.version);
        if (capabilities.contentDerivedVersions) expect(second.version).toBe(first.version);
        else expect(new Set([first.version, second.version, third.version]).size).toBe(3);
      });

      it("replaces a file with ifMatch on its current version", async () => {
        const { version } = await backend().writeFile("cas.txt", "one");
        const next = await backend().writeFile("cas.txt", "two", { ifMatch: version });
        expect(await readText("cas.txt")).toBe("two");
        expect(next.version).not.toBe(version);
        expect((await backend().stat("cas.txt")).version).toBe(next.version);
      });

      it("refuses ifMatch on a stale version with conflict and keeps the bytes", async () => {
        const { version } = await backend().writeFile("cas.txt", "one");
        await backend().writeFile("cas.txt", "two", { overwrite: true });
        const error = await expectKind(
          backend().writeFile("cas.txt", "three", { ifMatch: version }),
          "conflict",
        );
        expect(error.message).toContain("cas.txt");
        expect(await readText("cas.txt")).toBe("two");
        expect(await files()).toEqual(["cas.txt"]);
      });

      it("refuses ifMatch on a missing file with conflict and creates nothing", async () => {
        const { version } = await backend().writeFile("gone.txt", "x");
        await backend().deleteManagedOutputs("", ["gone.txt"]);
        await expectKind(backend().writeFile("gone.txt", "y", { ifMatch: version }), "conflict");
        await expectKind(
          backend().writeFile("never/there.txt", "y", { ifMatch: version }),
          "conflict",
        );
        expect(await files()).toEqual([]);
      });

      it("lets exactly one of many concurrent no-clobber creates win", async () => {
        const attempts = Array.from({ length: 16 }, (_, index) =>
          backend().writeFile("lease/.distributor.lease.json", `holder ${index}`),
        );
        const outcomes = await Promise.allSettled(attempts);
        const winners = outcomes.flatMap((outcome, index) =>
          outcome.status === "fulfilled" ? [index] : [],
        );
        expect(winners).toHaveLength(1);
        for (const outcome of outcomes) {
          if (outcome.status === "rejected") {
            expect(isStorageError(outcome.reason, "already_exists"), String(outcome.reason)).toBe(
              true,
            );
          }
        }
        expect(await readText("lease/.distributor.lease.json")).toBe(`holder ${winners[0]}`);
        expect(await files()).toEqual(["lease/.distributor.lease.json"]);
      });

      it("lets exactly one of many concurrent compare-and-swaps of one version win", async () => {
        const { version } = await backend().writeFile("swap/.distributor.json", "start");
        const attempts = Array.from({ length: 12 }, (_, index) =>
          backend().writeFile("swap/.distributor.json", `swap ${index}`, { ifMatch: version }),
        );
        const outcomes = await Promise.allSettled(attempts);
        const winners = outcomes.flatMap((outcome, index) =>
          outcome.status === "fulfilled" ? [index] : [],
        );
        expect(winners).toHaveLength(1);
        for (const outcome of outcomes) {
          if (outcome.status === "rejected") {
            expect(isStorageError(outcome.reason, "conflict"), String(outcome.reason)).toBe(true);
          }
        }
        expect(await readText("swap/.distributor.json")).toBe(`swap ${winners[0]}`);
        expect(await files()).toEqual(["swap/.distributor.json"]);
      });

      it("records the content type given, or one inferred from the extension", async () => {
        await backend().writeFile("page.html", "<p>x</p>");
        await backend().writeFile("data.bin", "x", { contentType: "application/x-custom" });
        const page = await backend().stat("page.html");
        const data = await backend().stat("data.bin");
        // Stores without content types (a filesystem) report none; those that keep one keep it.
        if (page.contentType !== undefined) {
          expect(page.contentType).toBe("text/html; charset=utf-8");
          expect(data.contentType).toBe("application/x-custom");
        } else {
          expect(data.contentType).toBeUndefined();
        }
      });

      it("stores object metadata where it can, and refuses it before any IO where it cannot", async () => {
        const headers = {
          cacheControl: "public, max-age=60",
          contentDisposition: "attachment",
          contentEncoding: "gzip",
        };
        if (backend().storesObjectMetadata) {
          await backend().writeFile("headers.txt", "x", headers);
          const entry = await backend().stat("headers.txt");
          expect({
            cacheControl: entry.cacheControl,
            contentDisposition: entry.contentDisposition,
            contentEncoding: entry.contentEncoding,
          }).toEqual(headers);
          // A later write without them stores none.
          await backend().writeFile("headers.txt", "y", { overwrite: true });
          const plain = await backend().stat("headers.txt");
          expect([plain.cacheControl, plain.contentDisposition, plain.contentEncoding]).toEqual([
            undefined,
            undefined,
            undefined,
          ]);
        } else {
          await expectKind(
            backend().writeFile("headers.txt", "x", { cacheControl: "no-cache" }),
            "unsupported",
          );
          await expectKind(backend().stat("headers.txt"), "not_found");
        }
      });
    });

    describe("many entries", () => {
      const paths = Array.from(
        { length: 1100 },
        (_, index) => `many/d${index % 10}/f${String(index).padStart(4, "0")}.txt`,
      );
      const putMany = async () => {
        for (let start = 0; start < paths.length; start += 50) {
          await Promise.all(
            paths.slice(start, start + 50).map((path) => backend().writeFile(path, "x")),
          );
        }
      };

      it("walks more than 1 000 entries in byte order", async () => {
        await putMany();
        const entries = await backend().walk("many", { recursive: true, limit: 2000 });
        expect(entries).toHaveLength(1110);
        const listed = entries.filter((entry) => entry.kind === "file").map((entry) => entry.path);
        expect(listed).toEqual([...paths].sort());
        await expectKind(
          backend().walk("many", { recursive: true, limit: 1000 }),
          "limit_exceeded",
        );
      });

      it("deletes more than 1 000 managed outputs in one call", async () => {
        await putMany();
        await backend().writeFile("many/.distributor.json", "{}");
        await backend().writeFile("keep.txt", "k");
        const outputs = paths.map((path) => path.slice("many/".length));
        await backend().deleteManagedOutputs("many", outputs, { pruneEmptyDirs: true });
        expect(await files()).toEqual(["keep.txt", "many/.distributor.json"]);
      }, 60_000);
    });

    describe("stat", () => {
      it("describes a file", async () => {
        await backend().writeFile("dir/file.txt", "12345");
        const entry = await backend().stat("dir/file.txt");
        expect(entry).toMatchObject({ path: "dir/file.txt", kind: "file", size: 5 });
        if (entry.modifiedAt !== undefined) expect(entry.modifiedAt).toBeInstanceOf(Date);
      });

      it("describes a directory", async () => {
        await backend().writeFile("dir/sub/file.txt", "x");
        expect(await backend().stat("dir")).toMatchObject({
          path: "dir",
          kind: "directory",
          size: 0,
        });
        expect(await backend().stat("dir/sub")).toMatchObject({ kind: "directory", size: 0 });
      });

      it("reports missing paths as not_found, naming operation, backend and path", async () => {
        const error = await expectKind(backend().stat("nowhere/file.txt"), "not_found");
        expect(error.backend).toBe(backend().name);
        expect(error.path).toBe("nowhere/file.txt");
        expect(error.message).toContain("stat");
        expect(error.message).toContain(backend().name);
        expect(error.message).toContain("nowhere/file.txt");
        await backend().writeFile("file.txt", "x");
        await expectKind(backend().stat("file.txt/below"), "not_found");
      });
    });

    describe("walk", () => {
      // Byte order puts "-" (0x2d) and "." (0x2e) before "/" (0x2f), upper case before lower case,
      // and U+FF21 (EF BC A1) before U+1F600 (F0 9F 98 80) although UTF-16 orders them the other way.
      const ordering = {
        "a-b": "1",
        "a.b": "22",
        "a/b": "333",
        "a/c/d": "4444",
        B: "55555",
        "\uff21": "666666",
        "\u{1f600}": "7777777",
      };
      const setup = (): Promise<void> => put(ordering);

      it("lists everything below the root recursively in byte order", async () => {
        await setup();
        expect(await tree()).toEqual([
          "f B 5",
          "d a",
          "f a-b 1",
          "f a.b 2",
          "f a/b 3",
          "d a/c",
          "f a/c/d 4",
          "f \uff21 6",
          "f \u{1f600} 7",
        ]);
      });

      it("lists direct children only when not recursive", async () => {
        await setup();
        const entries = await backend().walk("", { limit: 100 });
        expect(summarize(entries)).toEqual([
          "f B 5",
          "d a",
          "f a-b 1",
          "f a.b 2",
          "f \uff21 6",
          "f \u{1f600} 7",
        ]);
        expect(entries.find((entry) => entry.path === "a")?.size).toBe(0);
      });

      it("lists below a prefix, excluding the prefix and its sibling names", async () => {
        await setup();
        expect(summarize(await backend().walk("a", { limit: 100 }))).toEqual(["f a/b 3", "d a/c"]);
        expect(await tree("a")).toEqual(["f a/b 3", "d a/c", "f a/c/d 4"]);
        expect(await tree("a/c")).toEqual(["f a/c/d 4"]);
      });

      it("fails with limit_exceeded only past the limit", async () => {
        await setup();
        expect(await backend().walk("", { recursive: true, limit: 9 })).toHaveLength(9);
        await expectKind(backend().walk("", { recursive: true, limit: 8 }), "limit_exceeded");
        expect(await backend().walk("", { limit: 6 })).toHaveLength(6);
        await expectKind(backend().walk("", { limit: 5 }), "limit_exceeded");
        await expectKind(backend().walk("a", { recursive: true, limit: 0 }), "limit_exceeded");
      });

      it("returns an empty list for an empty root, a missing prefix, or a file", async () => {
        expect(await backend().walk("", { recursive: true, limit: 0 })).toEqual([]);
        await setup();
        expect(await backend().walk("missing", { recursive: true, limit: 10 })).toEqual([]);
        expect(await backend().walk("a/missing/deeper", { limit: 10 })).toEqual([]);
        expect(await backend().walk("a/b", { recursive: true, limit: 10 })).toEqual([]);
      });
    });

    describe("hasAny", () => {
      it("is false for an empty backend", async () => {
        expect(await backend().hasAny("")).toBe(false);
        expect(await backend().hasAny("bundle")).toBe(false);
      });

      it("does not count a sibling whose name merely starts with the prefix", async () => {
        await put({ "bundle-sibling/x.txt": "x", "bundle.txt": "y" });
        expect(await backend().hasAny("bundle")).toBe(false);
        expect(await backend().hasAny("bundle-sibling")).toBe(true);
        expect(await backend().hasAny("")).toBe(true);
        await backend().writeFile("bundle/deep/y.txt", "y");
        expect(await backend().hasAny("bundle")).toBe(true);
        expect(await backend().hasAny("bundle/deep")).toBe(true);
        expect(await backend().hasAny("bundle/other")).toBe(false);
      });

      it("counts a file at the prefix itself as content", async () => {
        await put({ "bundle.txt": "y" });
        expect(await backend().hasAny("bundle.txt")).toBe(true);
        expect(await backend().hasAny("bundle.txt/below")).toBe(false);
      });
    });

    describe("managed deletes", () => {
      const bundle = {
        "bundle/report.md": "md",
        "bundle/nested/deep/report.html": "html",
        "bundle/.distributor.json": "{}",
        "bundle/unmanaged.txt": "keep me",
        "bundle-sibling/report.md": "sibling",
      };

      it("deleteManagedOutputs removes the outputs but never the state file", async () => {
        await put(bundle);
        await backend().deleteManagedOutputs("bundle", ["report.md", "nested/deep/report.html"], {
          pruneEmptyDirs: true,
        });
        expect(await tree()).toEqual([
          "d bundle",
          "d bundle-sibling",
          "f bundle-sibling/report.md 7",
          "f bundle/.distributor.json 2",
          "f bundle/unmanaged.txt 7",
        ]);
      });

      it("deleteManagedBundle removes the outputs and the state file", async () => {
        await put(bundle);
        await backend().deleteManagedBundle("bundle", ["report.md", "nested/deep/report.html"], {
          pruneEmptyDirs: true,
        });
        expect(await tree()).toEqual([
          "d bundle",
          "d bundle-sibling",
          "f bundle-sibling/report.md 7",
          "f bundle/unmanaged.txt 7",
        ]);
      });

      it("prunes emptied directories up to, but never including, the root", async () => {
        await put({ "bundle/nested/deep/report.html": "html", "bundle/.distributor.json": "{}" });
        await backend().deleteManagedBundle("bundle", ["nested/deep/report.html"], {
          pruneEmptyDirs: true,
        });
        expect(await tree()).toEqual([]);
        expect(await backend().hasAny("")).toBe(false);
        await backend().writeFile("again.txt", "root still usable");
        expect(await readText("again.txt")).toBe("root still usable");
      });

      it("works on the root as bundle path", async () => {
        await put({ "top.txt": "t", ".distributor.json": "{}", "other.txt": "o" });
        await backend().deleteManagedOutputs("", ["top.txt"]);
        expect(await files()).toEqual([".distributor.json", "other.txt"]);
        await backend().deleteManagedBundle("", []);
        expect(await files()).toEqual(["other.txt"]);
      });

      it("fails with not_found for a missing target unless ignoreMissing", async () => {
        await put(bundle);
        const error = await expectKind(
          backend().deleteManagedOutputs("bundle", ["report.md", "missing.txt"]),
          "not_found",
        );
        expect(error.path).toBe("bundle/missing.txt");
        await backend().deleteManagedOutputs("bundle", ["report.md", "missing.txt"], {
          ignoreMissing: true,
        });
        await expectKind(backend().stat("bundle/report.md"), "not_found");
        await backend().deleteManagedBundle("bundle", [], { ignoreMissing: true });
        await expectKind(backend().deleteManagedBundle("bundle", []), "not_found");
        await backend().deleteManagedBundle("never-existed", ["x"], { ignoreMissing: true });
      });

      it("deletes a fenced output only at the version given, deleting the others", async () => {
        await put({ "bundle/keep.txt": "k" });
        const { version: stale } = await backend().writeFile("bundle/moved.txt", "one");
        const { version: seen } = await backend().writeFile("bundle/same.txt", "same");
        await backend().writeFile("bundle/moved.txt", "two, written by a newer run", {
          overwrite: true,
        });
        const error = await expectKind(
          backend().deleteManagedOutputs("bundle", ["moved.txt", "same.txt", "keep.txt"], {
            ifMatch: new Map([
              ["moved.txt", stale],
              ["same.txt", seen],
            ]),
          }),
          "conflict",
        );
        expect(error.path).toBe("bundle/moved.txt");
        expect(await readText("bundle/moved.txt")).toBe("two, written by a newer run");
        await expectKind(backend().stat("bundle/same.txt"), "not_found");
        await expectKind(backend().stat("bundle/keep.txt"), "not_found");
        // A fenced path already gone counts as deleted under ignoreMissing.
        await backend().deleteManagedOutputs("bundle", ["same.txt"], {
          ignoreMissing: true,
          ifMatch: new Map([["same.txt", seen]]),
        });
        expect(await files()).toEqual(["bundle/moved.txt"]);
      });

      it("refuses a target that is a directory and leaves it intact", async () => {
        await put(bundle);
        const error = await expectKind(
          backend().deleteManagedOutputs("bundle", ["nested"], { ignoreMissing: true }),
          "unsupported",
        );
        expect(error.path).toBe("bundle/nested");
        await expectKind(backend().deleteManagedBundle("", ["bundle"]), "unsupported");
        expect(await readText("bundle/nested/deep/report.html")).toBe("html");
      });
    });

    describe("deletePrefix", () => {
      it("removes the prefix and everything below it, never siblings or the parent", async () => {
        await put({
          "site/bundle/a.txt": "a",
          "site/bundle/deep/b.txt": "b",
          "site/bundle-sibling/c.txt": "c",
          "site/bundle.txt": "d",
        });
        await backend().deletePrefix("site/bundle");
        expect(await tree()).toEqual([
          "d site",
          "d site/bundle-sibling",
          "f site/bundle-sibling/c.txt 1",
          "f site/bundle.txt 1",
        ]);
      });

      it("prunes parents the deletion emptied when asked", async () => {
        await put({ "deep/er/bundle/a.txt": "a", "deep/keep.txt": "k" });
        await backend().deletePrefix("deep/er/bundle", { pruneEmptyDirs: true });
        expect(await tree()).toEqual(["d deep", "f deep/keep.txt 1"]);
      });

      it("deletes a prefix that is a file", async () => {
        await put({ "bundle.txt": "x", "bundle/y.txt": "y" });
        await backend().deletePrefix("bundle.txt");
        expect(await files()).toEqual(["bundle/y.txt"]);
      });

      it("keeps the listed paths and the directories above them, deleting the rest", async () => {
        await put({
          "bundle/.distributor.json": "{}",
          "bundle/keep/a.txt": "a",
          "bundle/keep/gone.txt": "g",
          "bundle/old/b.txt": "b",
          "bundle/top.txt": "t",
          "bundle-sibling/x.txt": "x",
        });
        await backend().deletePrefix("bundle", {
          keep: [".distributor.json", "keep/a.txt", "not/there.txt"],
        });
        expect(await files()).toEqual([
          "bundle-sibling/x.txt",
          "bundle/.distributor.json",
          "bundle/keep/a.txt",
        ]);
        await backend().deletePrefix("", { keep: ["bundle/keep/a.txt"] });
        expect(await files()).toEqual(["bundle/keep/a.txt"]);
      });

      it("fails with not_found for a missing prefix unless ignoreMissing", async () => {
        await put({ "bundle-sibling/x.txt": "x" });
        await expectKind(backend().deletePrefix("bundle"), "not_found");
        await backend().deletePrefix("bundle", { ignoreMissing: true });
        expect(await files()).toEqual(["bundle-sibling/x.txt"]);
      });

      it('empties the root for "" and keeps it usable', async () => {
        await backend().deletePrefix("");
        await put({ "a.txt": "a", "b/c.txt": "c", ".distributor.json": "{}" });
        await backend().deletePrefix("");
        expect(await tree()).toEqual([]);
        expect(await backend().hasAny("")).toBe(false);
        await backend().writeFile("b/c.txt", "again");
        expect(await readText("b/c.txt")).toBe("again");
      });
    });

    describe("invalid paths", () => {
      const invalid = [
        "../x",
        "/x",
        "a//b",
        "a/./b",
        "a/../b",
        "a\\b",
        "a/",
        "a\u0001b",
        "a\u007fb",
        "x".repeat(256),
      ];
      const invalidPaths = ["", ...invalid];

      it("accepts a 255-byte segment", async () => {
        const name = `${"é".repeat(127)}x`;
        expect(Buffer.byteLength(name)).toBe(255);
        await backend().writeFile(`dir/${name}`, "long");
        expect(await readText(`dir/${name}`)).toBe("long");
      });

      it("rejects invalid paths with invalid_path for every operation before any IO", async () => {
        const calls: [string, () => Promise<unknown>][] = [];
        for (const path of invalidPaths) {
          calls.push(
            ["read file", () => backend().readFile(path)],
            ["open reader", () => backend().openRead(path)],
            ["write file", () => backend().writeFile(path, "data")],
            ["write file", () => backend().writeFile(path, "data", { overwrite: true })],
            ["stat", () => backend().stat(path)],
            ["delete managed outputs", () => backend().deleteManagedOutputs("", [path])],
            ["delete managed bundle", () => backend().deleteManagedBundle("b", ["ok", path])],
          );
        }
        for (const prefix of invalid) {
          calls.push(
            ["walk", () => backend().walk(prefix, { recursive: true, limit: 10 })],
            ["has any", () => backend().hasAny(prefix)],
            ["delete prefix", () => backend().deletePrefix(prefix, { ignoreMissing: true })],
            [
              "delete managed outputs",
              () => backend().deleteManagedOutputs(prefix, ["x"], { ignoreMissing: true }),
            ],
            ["delete managed bundle", () => backend().deleteManagedBundle(prefix, [])],
          );
        }
        for (const [operation, call] of calls) {
          const error = await expectKind(call(), "invalid_path");
          expect(error.backend).toBe(backend().name);
          expect(error.operation).toBe(operation);
        }
        expect(await tree()).toEqual([]);
      });

      it("rejects invalid paths even when the target would otherwise exist", async () => {
        await put({ "a/b": "x" });
        await expectKind(backend().readFile("a//b"), "invalid_path");
        await expectKind(backend().readFile("a/./b"), "invalid_path");
        await expectKind(backend().deletePrefix("a/"), "invalid_path");
        expect(await readText("a/b")).toBe("x");
      });
    });

    describe("cancellation", () => {
      const aborted = (reason: unknown): AbortSignal => {
        const controller = new AbortController();
        controller.abort(reason);
        return controller.signal;
      };

      it("rejects every operation with the signal's reason when already aborted", async () => {
        await put({ "bundle/a.txt": "a", "bundle/.distributor.json": "{}" });
        const reason = new Error("stopped by the test");
        const signal = aborted(reason);
        const calls: (() => Promise<unknown>)[] = [
          () => backend().readFile("bundle/a.txt", { signal }),
          () => backend().openRead("bundle/a.txt", { signal }),
          () => readFileChunks(backend(), "bundle/a.txt", () => undefined, { signal }),
          () => backend().writeFile("new.txt", "data", { signal }),
          () => backend().writeFile("new.txt", Readable.from([Buffer.from("x")]), { signal }),
          () => backend().writeFile("bundle/a.txt", "replaced", { overwrite: true, signal }),
          () => backend().stat("bundle/a.txt", { signal }),
          () => backend().walk("", { recursive: true, limit: 10, signal }),
          () => backend().hasAny("bundle", { signal }),
          () => backend().deleteManagedOutputs("bundle", ["a.txt"], { signal }),
          () => backend().deleteManagedBundle("bundle", ["a.txt"], { signal }),
          () => backend().deletePrefix("bundle", { signal }),
          () => backend().deletePrefix("", { signal }),
        ];
        for (const call of calls) await expect(call()).rejects.toBe(reason);
        expect(await files()).toEqual(["bundle/.distributor.json", "bundle/a.txt"]);
        expect(await readText("bundle/a.txt")).toBe("a");
      });

      it("rejects with an AbortError when the signal has no custom reason", async () => {
        const controller = new AbortController();
        controller.abort();
        const error = await backend()
          .writeFile("x.txt", "x", { signal: controller.signal })
          .then(
            () => undefined,
            (caught: unknown) => caught,
          );
        expect(error).toBe(controller.signal.reason);
        expect((error as Error).name).toBe("AbortError");
        await expectKind(backend().stat("x.txt"), "not_found");
      });

      it("stops readFileChunks aborted mid-file with the signal's reason", async () => {
        await backend().writeFile("chunks/big.bin", patternChunks(2 * 1024 * 1024));
        const controller = new AbortController();
        const reason = new Error("aborted mid-read");
        let calls = 0;
        const reading = readFileChunks(
          backend(),
          "chunks/big.bin",
          () => {
            calls++;
            controller.abort(reason);
            return undefined;
          },
          { signal: controller.signal },
        );
        await expect(reading).rejects.toBe(reason);
        // No chunk after the one during which the signal fired.
        expect(calls).toBe(1);
      });

      it("stops a streaming write aborted mid-stream and leaves no file", async () => {
        const controller = new AbortController();
        const reason = new Error("aborted mid-stream");
        let pulls = 0;
        const source = new Readable({
          read() {
            pulls++;
            if (pulls === 1) this.push(Buffer.from("first chunk"));
            // Second pull: the producer stalls and the caller gives up.
            else if (pulls === 2) controller.abort(reason);
          },
        });
        await expect(
          backend().writeFile("stream/aborted.txt", source, { signal: controller.signal }),
        ).rejects.toBe(reason);
        await expectKind(backend().stat("stream/aborted.txt"), "not_found");
        expect(await files()).toEqual([]);
      });

      it("keeps the old bytes when a replacing stream is aborted", async () => {
        await backend().writeFile("keep.txt", "old bytes");
        const controller = new AbortController();
        const reason = new Error("aborted mid-stream");
        async function* source(): AsyncGenerator<Uint8Array> {
          yield Buffer.from("new ");
          controller.abort(reason);
          yield Buffer.from("bytes");
        }
        await expect(
          backend().writeFile("keep.txt", source(), { overwrite: true, signal: controller.signal }),
        ).rejects.toBe(reason);
        expect(await readText("keep.txt")).toBe("old bytes");
        expect(await files()).toEqual(["keep.txt"]);
      });
    });
  });
}

/** Awaits a promise that must reject with a `StorageError` of `kind`, and returns that error. */
export async function expectStorageError(
  promise: Promise<unknown>,
  kind: StorageErrorKind,
): Promise<StorageError> {
  const outcome = await promise.then(
    (value: unknown) => ({ value }),
    (error: unknown) => ({ error }),
  );
  if (!("error" in outcome)) {
    throw new Error(`expected a StorageError of kind ${kind}, but the call succeeded`);
  }
  const { error } = outcome;
  if (!isStorageError(error)) {
    throw new Error(`expected a StorageError of kind ${kind}, got ${String(error)}`, {
      cause: error,
    });
  }
  expect(error.kind, error.message).toBe(kind);
  return error;
}

const expectKind = expectStorageError;

/** `f path size` for files and `d path` for directories: short, readable walk snapshots. */
function summarize(entries: readonly StorageEntry[]): string[] {
  return entries.map((entry) => {
    if (entry.kind === "directory") {
      expect(entry.size).toBe(0);
      return `d ${entry.path}`;
    }
    return `f ${entry.path} ${entry.size}`;
  });
}

/** A deterministic byte pattern in 64 KiB chunks, regenerated for comparison. */
/**
 * A `ByteReader` over `bytes`, read at most 100 000 bytes at a time; with `failure`, the read
 * after the first one rejects with it.
 */
function bufferReader(bytes: Buffer, failure?: Error): ByteReader & { readonly closed: boolean } {
  let offset = 0;
  let reads = 0;
  let closed = false;
  return {
    async read(into: Uint8Array): Promise<number> {
      if (closed) throw new Error("read after close");
      reads++;
      if (failure !== undefined && reads > 1) throw failure;
      const length = Math.min(into.length, 100_000, bytes.length - offset);
      into.set(bytes.subarray(offset, offset + length));
      offset += length;
      return length;
    },
    close(): void {
      closed = true;
    },
    get closed() {
      return closed;
    },
  };
}

async function* patternChunks(size: number): AsyncGenerator<Uint8Array> {
  const chunkSize = 64 * 1024;
  for (let offset = 0; offset < size; offset += chunkSize) {
    const length = Math.min(chunkSize, size - offset);
    yield Uint8Array.from({ length }, (_, index) => (offset + index) % 251);
  }
}

export * from "./tcp-proxy.js";
