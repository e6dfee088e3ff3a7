import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { createMemoryBackend } from "../src/memory/index.js";
import { describeBackendContract, expectStorageError } from "../src/testing/index.js";

describeBackendContract("memory", () => ({ backend: createMemoryBackend() }));

describe("memory backend", () => {
  it("names itself and its location", () => {
    const backend = createMemoryBackend({ label: "fixtures" });
    expect(backend.name).toBe("memory");
    expect(backend.location).toBe("memory:fixtures");
    expect(createMemoryBackend().location).toBe("memory:memory");
  });

  it("starts with seeded files and stamps them with the given clock", async () => {
    const now = new Date("2026-06-04T11:55:00Z");
    const backend = createMemoryBackend({
      files: { "bundle/manifest.json": "{}", "bundle/data.bin": new Uint8Array([1, 2, 3]) },
      now: () => now,
    });
    expect(Buffer.from(await backend.readFile("bundle/manifest.json")).toString()).toBe("{}");
    expect(await backend.stat("bundle/data.bin")).toEqual({
      path: "bundle/data.bin",
      kind: "file",
      size: 3,
      modifiedAt: now,
      version: "m2",
      contentType: "application/octet-stream",
    });
  });

  it("rejects invalid or conflicting seed paths", () => {
    expect(() => createMemoryBackend({ files: { "../x": "x" } })).toThrow(/invalid|path/);
    expect(() => createMemoryBackend({ files: { a: "file", "a/b": "below a file" } })).toThrow(
      /is a file/,
    );
  });

  it("copies seeded bytes so the caller cannot change them later", async () => {
    const bytes = Buffer.from("seeded");
    const backend = createMemoryBackend({ files: { "s.txt": bytes } });
    bytes.fill(0);
    expect(Buffer.from(await backend.readFile("s.txt")).toString()).toBe("seeded");
  });

  it("refuses to write below a file or onto a directory", async () => {
    const backend = createMemoryBackend({ files: { a: "file", "d/x": "x" } });
    const below = await expectStorageError(backend.writeFile("a/b", "x"), "conflict");
    expect(below.message).toContain('"a" is a file');
    await expectStorageError(backend.writeFile("d", "x", { overwrite: true }), "unsupported");
    await expectStorageError(backend.readFile("d"), "unsupported");
  });

  it("does not make a streamed write visible until the stream ends", async () => {
    const backend = createMemoryBackend();
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let started: () => void = () => undefined;
    const firstChunkTaken = new Promise<void>((resolve) => {
      started = resolve;
    });
    async function* source(): AsyncGenerator<Uint8Array> {
      yield Buffer.from("part one, ");
      started();
      await gate;
      yield Buffer.from("part two");
    }
    const writing = backend.writeFile("slow.txt", source());
    await firstChunkTaken;
    await expectStorageError(backend.stat("slow.txt"), "not_found");
    expect(await backend.hasAny("")).toBe(false);
    release();
    await writing;
    expect(Buffer.from(await backend.readFile("slow.txt")).toString()).toBe("part one, part two");
  });

  it("keeps no-clobber when another write lands while a stream is consumed", async () => {
    const backend = createMemoryBackend();
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    async function* source(): AsyncGenerator<Uint8Array> {
      yield Buffer.from("slow");
      await gate;
    }
    const slow = backend.writeFile("race.txt", source());
    await backend.writeFile("race.txt", "fast");
    release();
    await expectStorageError(slow, "already_exists");
    expect(Buffer.from(await backend.readFile("race.txt")).toString()).toBe("fast");
  });

  it("accepts string chunks from a Readable", async () => {
    const backend = createMemoryBackend();
    await backend.writeFile("strings.txt", Readable.from(["é", "✓"]));
    expect(Buffer.from(await backend.readFile("strings.txt")).toString()).toBe("é✓");
  });

  it("refuses every operation after close with unavailable", async () => {
    const backend = createMemoryBackend({ files: { "a.txt": "a" } });
    await backend.close();
    await expectStorageError(backend.readFile("a.txt"), "unavailable");
    await expectStorageError(backend.writeFile("b.txt", "b"), "unavailable");
    await expectStorageError(backend.walk("", { limit: 1 }), "unavailable");
  });

  it("rejects a malformed walk limit or maxBytes with RangeError", async () => {
    const backend = createMemoryBackend({ files: { "a.txt": "a" } });
    await expect(backend.walk("", { limit: -1 })).rejects.toBeInstanceOf(RangeError);
    await expect(backend.walk("", { limit: 1.5 })).rejects.toBeInstanceOf(RangeError);
    await expect(backend.readFile("a.txt", { maxBytes: Number.NaN })).rejects.toBeInstanceOf(
      RangeError,
    );
  });
});
