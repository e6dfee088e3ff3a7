import { mkdtemp, readFile, readlink, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createMemoryDiskBackend,
  type FsImageEntry,
  MemoryFsDriver,
  memoryDisk,
  readDirectoryImage,
  writeDirectoryImage,
} from "../src/testing/index.js";

const text = (driver: MemoryFsDriver) =>
  Object.fromEntries(
    driver
      .image()
      .map((entry) => [
        entry.path,
        entry.kind === "file" ? Buffer.from(entry.bytes).toString() : entry.kind,
      ]),
  );

async function put(driver: MemoryFsDriver, path: string, bytes: string, flush: boolean) {
  const handle = await driver.createExclusive(path);
  await driver.write(handle, Buffer.from(bytes), 0);
  if (flush) await driver.fsync(handle);
  await driver.close(handle);
}

describe("a power cut of the in-memory driver", () => {
  it("keeps only flushed data under flushed names (flushed_only)", async () => {
    const driver = new MemoryFsDriver();
    await driver.mkdir("d");
    await put(driver, "d/synced", "one", true);
    await put(driver, "d/unsynced", "two", false);
    await put(driver, "top", "three", true);
    await driver.syncDirectory("");
    // The root's entry for d is durable, d's own entries are not yet.
    expect(text(driver.powerCut("flushed_only"))).toEqual({ d: "directory", top: "three" });

    const again = new MemoryFsDriver();
    await again.mkdir("d");
    await put(again, "d/synced", "one", true);
    await put(again, "d/unsynced", "two", false);
    await again.syncDirectory("d");
    // d's entries are durable, but d's own name in the root is not.
    expect(text(again.powerCut("flushed_only"))).toEqual({});
  });

  it("keeps every name but only flushed data (names_first)", async () => {
    const driver = new MemoryFsDriver();
    await driver.mkdir("d");
    await put(driver, "d/synced", "one", true);
    await put(driver, "d/unsynced", "two", false);
    expect(text(driver.powerCut("names_first"))).toEqual({
      d: "directory",
      "d/synced": "one",
      "d/unsynced": "",
    });
  });

  it("brings back an unlinked name and the bytes of an overwritten file until their flush", async () => {
    const driver = new MemoryFsDriver({
      image: [
        { path: "a", kind: "file", inode: 7, bytes: Buffer.from("old a"), mtimeMs: 1 },
        { path: "b", kind: "file", inode: 8, bytes: Buffer.from("old b"), mtimeMs: 1 },
      ],
    });
    await driver.unlink("a");
    await put(driver, "b.tmp", "new b", true);
    await driver.rename("b.tmp", "b");
    expect(text(driver.powerCut("flushed_only"))).toEqual({ a: "old a", b: "old b" });
    expect(text(driver.powerCut("names_first"))).toEqual({ b: "new b" });
  });

  it("refuses every request of the driver whose power failed", async () => {
    const driver = new MemoryFsDriver();
    const handle = await driver.createExclusive("f");
    const after = driver.powerCut("names_first");
    await expect(driver.write(handle, Buffer.from("late"), 0)).rejects.toThrow(/EIO/);
    await expect(driver.mkdir("late")).rejects.toThrow(/EIO/);
    expect(text(after)).toEqual({ f: "" });
  });

  it("keeps what the write protocol flushed before a commit, in both orders", async () => {
    for (const order of ["flushed_only", "names_first"] as const) {
      const driver = memoryDisk([]);
      const backend = createMemoryDiskBackend(driver);
      await backend.writeFile("site/docs/c.txt", "c");
      await backend.writeFile("site/.distributor.json", "state", { commit: true });
      expect(text(driver.powerCut(order)), order).toEqual({
        site: "directory",
        "site/.distributor.json": "state",
        "site/docs": "directory",
        "site/docs/c.txt": "c",
      });
    }
  });

  it("without fsync, keeps the directories writes made before a commit, not their files", async () => {
    const driver = memoryDisk([{ path: "releases", kind: "directory" }]);
    const backend = createMemoryDiskBackend(driver, { fsync: false });
    await backend.writeFile("releases/r2/a.txt", "a");
    await backend.links?.hardLink("releases/r2/a.txt", "releases/r3/a.txt");
    await backend.writeFile("state.json", "names r2 and r3", { commit: true });
    // The state may name the directories as a whole (a release): they are there; the names
    // inside them were never flushed.
    expect(text(driver.powerCut("flushed_only"))).toEqual({
      releases: "directory",
      "releases/r2": "directory",
      "releases/r3": "directory",
      "state.json": "names r2 and r3",
    });
  });
});

describe("directory images", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "distributor-disk-image-"));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it("write and read back directories, files, hard links and symlinks", async () => {
    const image: FsImageEntry[] = [
      { path: "a", kind: "file", inode: 1, bytes: Buffer.from("one"), mtimeMs: 1_700_000_000_000 },
      { path: "current", kind: "symlink", target: "r/1" },
      { path: "r", kind: "directory" },
      { path: "r/1", kind: "directory" },
      { path: "r/1/a", kind: "file", inode: 1, bytes: Buffer.from("one"), mtimeMs: 1 },
    ];
    const root = join(dir, "tree");
    await writeDirectoryImage(root, image);
    expect(await readFile(join(root, "r/1/a"), "utf8")).toBe("one");
    expect((await stat(join(root, "a"))).ino).toBe((await stat(join(root, "r/1/a"))).ino);
    expect((await stat(join(root, "a"))).mtimeMs).toBe(1_700_000_000_000);
    expect(await readlink(join(root, "current"))).toBe("r/1");
    const read = await readDirectoryImage(root);
    expect(read.map((entry) => `${entry.kind} ${entry.path}`)).toEqual(
      image.map((entry) => `${entry.kind} ${entry.path}`),
    );
    const driver = new MemoryFsDriver({ image: read });
    expect(text(driver)).toEqual({
      a: "one",
      current: "symlink",
      r: "directory",
      "r/1": "directory",
      "r/1/a": "one",
    });
  });
});
