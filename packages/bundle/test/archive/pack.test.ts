import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { link, mkdir, readFile, symlink, truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { Readable, type Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { gunzipSync } from "node:zlib";
import { x as extract, Parser, type ReadEntry } from "tar";
import { afterEach, describe, expect, it } from "vitest";
import { ARCHIVE_DIRECTORY_MODE, ARCHIVE_FILE_MODE, packBundle } from "../../src/archive/pack.js";
import { BundleValidationError } from "../../src/errors.js";
import { rejectionOf, TempDirs, writeBundle, writeTree } from "../helpers.js";

const dirs = new TempDirs();
afterEach(() => dirs.cleanup());

interface ListedEntry {
  path: string;
  type: string;
  mode: number | undefined;
  size: number | undefined;
  uid: number | undefined;
  gid: number | undefined;
  uname: string | undefined;
  gname: string | undefined;
  mtime: number | undefined;
}

/** Every entry header of a gzip tar stream, in archive order, read by tar's own parser. */
async function listArchive(stream: Readable): Promise<ListedEntry[]> {
  const entries: ListedEntry[] = [];
  const parser = new Parser({
    onReadEntry: (entry: ReadEntry) => {
      entries.push({
        path: entry.path,
        type: entry.type,
        mode: entry.mode,
        size: entry.size,
        uid: entry.header.uid,
        gid: entry.header.gid,
        uname: entry.header.uname,
        gname: entry.header.gname,
        mtime: entry.mtime?.getTime(),
      });
      entry.resume();
    },
  });
  await pipeline(stream, parser as unknown as Writable);
  return entries;
}

async function bytesOf(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

const LONG_PATH = `${"deep/".repeat(30)}${"n".repeat(60)}.txt`;
const BINARY = Buffer.from(Array.from({ length: 70_000 }, (_, i) => (i * 7919) % 256));

async function richBundle(): Promise<string> {
  const root = await dirs.make();
  await writeBundle(root, "", {
    "report.md": "# Report\nSunny.\n",
    "a-b.txt": "sibling sorting before a/\n",
    "a/c.txt": "nested\n",
    "a/empty.txt": "",
    "ünïcode/名前.txt": "utf-8 names\n",
    [LONG_PATH]: "a path longer than the ustar name field\n",
  });
  await writeFile(join(root, "data.bin"), BINARY);
  await mkdir(join(root, "empty-dir"));
  return root;
}

describe("packBundle", () => {
  it("packs every file and directory at the archive root, byte for byte", async () => {
    const root = await richBundle();
    const packed = await packBundle(root);
    const out = await dirs.make();

    await pipeline(packed.stream, extract({ cwd: out }) as unknown as Writable);

    for (const path of [
      "manifest.json",
      "report.md",
      "a-b.txt",
      "a/c.txt",
      "a/empty.txt",
      "ünïcode/名前.txt",
      LONG_PATH,
      "data.bin",
    ]) {
      expect(await readFile(join(out, path)), path).toEqual(await readFile(join(root, path)));
    }
    // The files the archive holds are those of the directory, nothing more.
    const listing = execFileSync("find", [".", "-mindepth", "1"], { cwd: out, encoding: "utf8" });
    const original = execFileSync("find", [".", "-mindepth", "1"], { cwd: root, encoding: "utf8" });
    expect(listing.split("\n").sort()).toEqual(original.split("\n").sort());
    expect(packed.files).toBe(8);
    expect(packed.size).toBe(
      (await Promise.all(["manifest.json", "data.bin"].map((p) => readFile(join(root, p))))).reduce(
        (sum, bytes) => sum + bytes.length,
        0,
      ) +
        Buffer.byteLength("# Report\nSunny.\n") +
        Buffer.byteLength("sibling sorting before a/\n") +
        Buffer.byteLength("nested\n") +
        Buffer.byteLength("utf-8 names\n") +
        Buffer.byteLength("a path longer than the ustar name field\n"),
    );
  });

  it("writes sorted entries with portable headers", async () => {
    const root = await richBundle();

    const entries = await listArchive((await packBundle(root)).stream);

    // Ascending byte order of the logical path (a directory's without its trailing slash), so
    // every directory comes before what it holds.
    const paths = entries.map((entry) => entry.path);
    const logical = paths.map((path) => path.replace(/\/$/, ""));
    expect(logical).toEqual(
      [...logical].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b))),
    );
    expect(paths.slice(0, 4)).toEqual(["a/", "a-b.txt", "a/c.txt", "a/empty.txt"]);
    expect(paths).toContain(LONG_PATH);
    expect(paths).toContain("empty-dir/");
    for (const entry of entries) {
      expect(entry.path.startsWith("/") || entry.path.startsWith("./"), entry.path).toBe(false);
      expect(["File", "Directory"]).toContain(entry.type);
      expect(entry.mode).toBe(
        entry.type === "Directory" ? ARCHIVE_DIRECTORY_MODE : ARCHIVE_FILE_MODE,
      );
      expect([entry.uid, entry.gid]).toEqual([0, 0]);
      expect(entry.uname ?? "").toBe("");
      expect(entry.gname ?? "").toBe("");
      expect(entry.mtime).toBe(0);
    }
    expect(entries.find((entry) => entry.path === "data.bin")?.size).toBe(BINARY.length);
  });

  it("produces the same bytes for the same tree, whatever the file modes and times", async () => {
    const root = await richBundle();
    const first = await bytesOf((await packBundle(root)).stream);
    execFileSync("chmod", ["0755", join(root, "report.md")]);
    execFileSync("touch", ["-d", "2030-01-01", join(root, "a", "c.txt")]);

    const second = await bytesOf((await packBundle(root)).stream);

    expect(second.equals(first)).toBe(true);
    expect(gunzipSync(first).subarray(257, 262).toString()).toBe("ustar");
    // The system's tar reads it too.
    const listed = execFileSync("tar", ["-tzf", "-"], { input: first, encoding: "utf8" });
    expect(listed.split("\n")).toContain(LONG_PATH);
  });

  it("writes the given mtime on every entry", async () => {
    const root = await richBundle();
    const mtime = new Date("2026-06-04T11:55:00Z");

    const entries = await listArchive((await packBundle(root, { mtime })).stream);

    expect(new Set(entries.map((entry) => entry.mtime))).toEqual(new Set([mtime.getTime()]));
  });

  it("packs hard-linked files as two regular files", async () => {
    const root = await dirs.make();
    await writeTree(root, { "one.txt": "shared bytes\n" });
    await link(join(root, "one.txt"), join(root, "two.txt"));

    const entries = await listArchive((await packBundle(root)).stream);

    expect(entries.map((entry) => [entry.path, entry.type, entry.size])).toEqual([
      ["one.txt", "File", 13],
      ["two.txt", "File", 13],
    ]);
  });

  it("refuses a symlink, naming its path, before reading anything", async () => {
    const root = await dirs.make();
    await writeBundle(root, "", { "report.md": "# Report\n" });
    await mkdir(join(root, "sub"));
    await symlink("../report.md", join(root, "sub", "link.md"));

    const error = await rejectionOf(() => packBundle(root));

    expect(error).toBeInstanceOf(BundleValidationError);
    expect((error as BundleValidationError).issues).toEqual([
      expect.objectContaining({ code: "unsupported_entry", path: "sub/link.md" }),
    ]);
    expect((error as Error).message).toContain("sub/link.md: is a symlink; symlinks are refused");
    expect((error as Error).message).toContain(root);
  });

  it("refuses a special file and a reserved name", async () => {
    const root = await dirs.make();
    await writeTree(root, { "report.md": "# Report\n", "nested/.distributor.json": "{}" });
    execFileSync("mkfifo", [join(root, "pipe")]);

    const error = (await rejectionOf(() => packBundle(root))) as BundleValidationError;

    expect(error.issues.map((issue) => [issue.path, issue.code])).toEqual([
      ["nested/.distributor.json", "forbidden_file"],
      ["pipe", "unsupported_entry"],
    ]);
  });

  it("refuses a tree larger than maxEntries", async () => {
    const root = await dirs.make();
    await writeTree(root, { "a.txt": "a", "b.txt": "b", "c.txt": "c" });

    const error = (await rejectionOf(() =>
      packBundle(root, { maxEntries: 2 }),
    )) as BundleValidationError;

    expect(error.code).toBe("too_many_entries");
  });

  it("fails the stream when a file shrinks while it is packed", async () => {
    const root = await dirs.make();
    // Incompressible, so that backpressure keeps the packer far from the end of the file.
    await writeTree(root, { "big.bin": randomBytes(8 * 1024 * 1024) });
    const packed = await packBundle(root);
    // Start reading, then cut the file short before the packer reaches its end.
    const iterator = packed.stream[Symbol.asyncIterator]();
    await iterator.next();
    await truncate(join(root, "big.bin"), 1000);

    const error = await rejectionOf(async () => {
      for (;;) if ((await iterator.next()).done) return;
    });

    expect(error).toBeInstanceOf(BundleValidationError);
    expect((error as Error).message).toMatch(/big\.bin: (shrank|changed) while packing/);
  });

  it("stops reading when aborted", async () => {
    const root = await dirs.make();
    await writeTree(root, { "big.bin": Buffer.alloc(1024 * 1024, 2) });
    const controller = new AbortController();
    const packed = await packBundle(root, { signal: controller.signal });
    const iterator = packed.stream[Symbol.asyncIterator]();
    await iterator.next();

    controller.abort();

    const error = await rejectionOf(async () => {
      for (;;) if ((await iterator.next()).done) return;
    });
    expect((error as Error).name).toBe("AbortError");
  });

  it("streams an archive of a file larger than any one chunk", async () => {
    const root = await dirs.make();
    const big = Buffer.alloc(3 * 1024 * 1024 + 17, 7);
    await writeTree(root, { "big.bin": big });

    const out = await dirs.make();
    await pipeline(Readable.from((await packBundle(root)).stream), extract({ cwd: out }));

    expect((await readFile(join(out, "big.bin"))).equals(big)).toBe(true);
  });
});
