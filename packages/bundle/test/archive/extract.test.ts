import { createHash } from "node:crypto";
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { gzipSync } from "node:zlib";
import { c as createTar } from "tar";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ArchiveError, extractArchive } from "../../src/archive/extract.js";
import { rawTar } from "../../src/testing/index.js";

let workspace: string;
let staging: string;
let outside: string;

beforeEach(async () => {
  workspace = await mkdtemp(join(tmpdir(), "distributor-extract-"));
  staging = join(workspace, "staging", "upload");
  outside = join(workspace, "staging");
  await mkdir(staging, { recursive: true });
});
afterEach(async () => {
  await rm(workspace, { recursive: true, force: true });
});

const limits = { maxExtractedSize: 1024 * 1024, maxEntries: 100 };

async function refusal(archive: Buffer, options = limits): Promise<ArchiveError> {
  await rm(staging, { recursive: true, force: true });
  await mkdir(staging);
  const error = await extractArchive(Readable.from([archive]), staging, options).catch(
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ArchiveError);
  return error as ArchiveError;
}

async function listTree(directory: string): Promise<string[]> {
  const entries = await readdir(directory, { recursive: true });
  return entries.map(String).sort();
}

describe("extractArchive", () => {
  it("extracts a packed gzip tar with a top-level directory and locates the bundle", async () => {
    const source = join(workspace, "source", "bundle");
    await mkdir(join(source, "docs"), { recursive: true });
    await writeFile(join(source, "manifest.json"), "{}");
    await writeFile(join(source, "docs", "report.md"), "# Report\n");
    const chunks: Buffer[] = [];
    for await (const chunk of createTar({ gzip: true, cwd: join(workspace, "source") }, [
      "bundle",
    ])) {
      chunks.push(chunk as Buffer);
    }
    const archive = Buffer.concat(chunks);
    // Small chunks exercise the gzip sniffing across chunk boundaries.
    const pieces = Array.from({ length: Math.ceil(archive.length / 7) }, (_, i) =>
      archive.subarray(i * 7, i * 7 + 7),
    );
    const result = await extractArchive(Readable.from(pieces), staging, limits);
    expect(result).toMatchObject({ files: 2, bytes: 11, bundlePath: "bundle", gzip: true });
    expect(await readFile(join(staging, "bundle", "docs", "report.md"), "utf8")).toBe("# Report\n");
  });

  it("extracts a plain tar rooted at the bundle, with ./ prefixes", async () => {
    const archive = rawTar([
      { path: "./", type: "Directory", mode: 0o755 },
      { path: "./manifest.json", body: "{}" },
      { path: "./a/b.txt", body: "b" },
    ]);
    const result = await extractArchive(Readable.from([archive]), staging, limits);
    expect(result).toMatchObject({ files: 2, bundlePath: "", gzip: false });
    expect(await listTree(staging)).toEqual(["a", "a/b.txt", "manifest.json"]);
  });

  it.each([
    ["../x", "unsafe_path"],
    ["a/../../x", "unsafe_path"],
    ["/etc/x", "unsafe_path"],
    ["a\\b", "unsafe_path"],
    ["a/.distributor.json", "reserved_name"],
    [".distributor.lease.json", "reserved_name"],
  ] as const)("refuses the entry %s (%s) and writes nothing outside", async (path, code) => {
    const error = await refusal(
      rawTar([
        { path: "manifest.json", body: "{}" },
        { path, body: "x" },
      ]),
    );
    expect(error.code).toBe(code);
    expect(error.message).toContain(path.replace("\\", "\\\\"));
    expect(await readdir(outside)).toEqual(["upload"]);
    expect(await listTree(staging)).toEqual(["manifest.json"]);
  });

  it.each([
    [{ path: "link", type: "SymbolicLink", linkpath: "/etc/passwd" }, "symbolic link"],
    [{ path: "hard", type: "Link", linkpath: "manifest.json" }, "hard link"],
    [{ path: "tty", type: "CharacterDevice" }, "character device"],
    [{ path: "disk", type: "BlockDevice" }, "block device"],
    [{ path: "pipe", type: "FIFO" }, "FIFO"],
  ] as const)("refuses a %o entry", async (entry, what) => {
    const error = await refusal(rawTar([{ path: "manifest.json", body: "{}" }, entry]));
    expect(error.code).toBe("unsupported_entry");
    expect(error.message).toContain(what);
    expect(await listTree(staging)).toEqual(["manifest.json"]);
  });

  it("refuses a duplicate path without replacing the first file", async () => {
    const error = await refusal(
      rawTar([
        { path: "report.md", body: "first" },
        { path: "report.md", body: "second" },
      ]),
    );
    expect(error.code).toBe("duplicate_entry");
    expect(await readFile(join(staging, "report.md"), "utf8")).toBe("first");
  });

  it("refuses a file below a file and a directory over a file", async () => {
    expect(
      (
        await refusal(
          rawTar([
            { path: "a", body: "x" },
            { path: "a/b", body: "y" },
          ]),
        )
      ).code,
    ).toBe("duplicate_entry");
    expect(
      (
        await refusal(
          rawTar([
            { path: "a/b", body: "y" },
            { path: "a", body: "x" },
          ]),
        )
      ).code,
    ).toBe("duplicate_entry");
  });

  it("stops a gzip bomb at the extracted-size limit", async () => {
    const bomb = gzipSync(rawTar([{ path: "zeros", body: Buffer.alloc(32 * 1024 * 1024) }]));
    expect(bomb.length).toBeLessThan(64 * 1024);
    const error = await refusal(bomb);
    expect(error.code).toBe("extracted_size_exceeded");
    const size = await stat(join(staging, "zeros")).then(
      (s) => s.size,
      () => 0,
    );
    expect(size).toBeLessThanOrEqual(limits.maxExtractedSize);
  });

  it("counts bytes across files while streaming", async () => {
    const part = Buffer.alloc(400 * 1024, 1);
    const error = await refusal(
      gzipSync(
        rawTar([
          { path: "a", body: part },
          { path: "b", body: part },
          { path: "c", body: part },
        ]),
      ),
    );
    expect(error.code).toBe("extracted_size_exceeded");
  });

  it("enforces the entry-count limit", async () => {
    const entries = Array.from({ length: 5 }, (_, i) => ({ path: `f${i}`, body: "x" }));
    const error = await refusal(rawTar(entries), { maxExtractedSize: 1024, maxEntries: 3 });
    expect(error.code).toBe("too_many_entries");
  });

  it("refuses input that is not a tar, a truncated tar and an empty body", async () => {
    expect((await refusal(Buffer.from("hello world, not a tar archive at all"))).code).toBe(
      "invalid_archive",
    );
    const whole = rawTar([{ path: "manifest.json", body: "x".repeat(2000) }]);
    expect((await refusal(whole.subarray(0, 1024))).code).toBe("invalid_archive");
    expect((await refusal(Buffer.alloc(0))).code).toBe("invalid_archive");
    expect((await refusal(Buffer.from([0x1f, 0x8b, 1, 2, 3, 4]))).code).toBe("invalid_archive");
    const twice = gzipSync(gzipSync(rawTar([{ path: "manifest.json", body: "{}" }])));
    expect((await refusal(twice)).message).toMatch(/compressed twice/);
  });

  it("refuses an archive without a manifest at the root or in one top-level directory", async () => {
    const error = await refusal(
      rawTar([
        { path: "a/manifest.json", body: "{}" },
        { path: "b/manifest.json", body: "{}" },
      ]),
    );
    expect(error.code).toBe("no_bundle");
  });

  it("refuses a staging directory that is not empty", async () => {
    await writeFile(join(staging, "left-over"), "x");
    await expect(
      extractArchive(Readable.from([rawTar([{ path: "a", body: "x" }])]), staging, limits),
    ).rejects.toThrow(/not empty/);
  });

  it("keeps file contents intact", async () => {
    const body = Buffer.from(Array.from({ length: 5000 }, (_, i) => i % 251));
    await extractArchive(
      Readable.from([gzipSync(rawTar([{ path: "manifest.json", body }]))]),
      staging,
      limits,
    );
    const digest = (b: Buffer) => createHash("sha256").update(b).digest("hex");
    expect(digest(await readFile(join(staging, "manifest.json")))).toBe(digest(body));
  });
});
