import { createReadStream } from "node:fs";
import {
  appendFile,
  lstat,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  rename,
  rm,
  stat,
  symlink,
  writeFile,
} from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { StorageBackend } from "../src/backend.js";
import { createLocalBackend } from "../src/local/index.js";
import { readFileChunks } from "../src/read-chunks.js";
import { describeBackendContract, expectStorageError } from "../src/testing/index.js";

describeBackendContract(
  "local",
  async () => {
    const dir = await mkdtemp(join(tmpdir(), "distributor-local-contract-"));
    return {
      backend: createLocalBackend({ root: join(dir, "root") }),
      cleanup: () => rm(dir, { recursive: true, force: true }),
    };
  },
  { links: "full" },
);

// Without fsync only the flushing changes: every rule of the contract must hold the same.
describeBackendContract(
  "local (fsync: false)",
  async () => {
    const dir = await mkdtemp(join(tmpdir(), "distributor-local-nofsync-"));
    return {
      backend: createLocalBackend({ root: join(dir, "root"), fsync: false }),
      cleanup: () => rm(dir, { recursive: true, force: true }),
    };
  },
  { links: "full" },
);

// On the thread pool only who waits for the kernel changes: every rule must hold the same.
describeBackendContract(
  "local (blockingCalls: false)",
  async () => {
    const dir = await mkdtemp(join(tmpdir(), "distributor-local-threadpool-"));
    return {
      backend: createLocalBackend({ root: join(dir, "root"), blockingCalls: false }),
      cleanup: () => rm(dir, { recursive: true, force: true }),
    };
  },
  { links: "full" },
);

describe("local backend", () => {
  let dir: string;
  let root: string;
  let outside: string;
  let backend: StorageBackend;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "distributor-local-"));
    root = join(dir, "root");
    outside = join(dir, "outside");
    await mkdir(root);
    await mkdir(outside);
    await writeFile(join(outside, "secret.txt"), "outside bytes");
    backend = createLocalBackend({ root });
  });

  afterEach(async () => {
    await backend.close();
    await rm(dir, { recursive: true, force: true });
  });

  const text = async (path: string): Promise<string> =>
    Buffer.from(await backend.readFile(path)).toString("utf8");

  it("names itself and its resolved root", () => {
    expect(backend.name).toBe("local");
    expect(backend.location).toBe(`local:${root}`);
    const relative = createLocalBackend({ root: "some/dir" });
    expect(relative.location).toBe(`local:${join(process.cwd(), "some/dir")}`);
  });

  it("creates a missing root on first write and treats it as empty until then", async () => {
    const fresh = createLocalBackend({ root: join(dir, "new", "root") });
    expect(await fresh.walk("", { recursive: true, limit: 10 })).toEqual([]);
    expect(await fresh.hasAny("")).toBe(false);
    await expectStorageError(fresh.readFile("a.txt"), "not_found");
    await fresh.deletePrefix("");
    await fresh.writeFile("a/b.txt", "created");
    expect(await readFile(join(dir, "new", "root", "a", "b.txt"), "utf8")).toBe("created");
  });

  it("writes real files under the root and nowhere else", async () => {
    await backend.writeFile("bundle/report.md", "# report");
    expect(await readFile(join(root, "bundle", "report.md"), "utf8")).toBe("# report");
    expect(await readdir(dir)).toEqual(["outside", "root"]);
  });

  it("keeps the root when deletes empty it", async () => {
    await backend.writeFile("bundle/nested/a.txt", "a");
    await backend.deletePaths("bundle", ["nested/a.txt"], { pruneEmptyDirs: true });
    expect(await readdir(root)).toEqual([]);
    await backend.writeFile("b.txt", "b");
    await backend.deletePrefix("b.txt", { pruneEmptyDirs: true });
    await backend.writeFile("c/d.txt", "d");
    await backend.deletePrefix("");
    expect((await stat(root)).isDirectory()).toBe(true);
    expect(await readdir(root)).toEqual([]);
  });

  it("opens a versioned reader: the bytes and version readVersioned gives, bounded by maxBytes", async () => {
    const bytes = Buffer.alloc(300_000, 7);
    await backend.writeFile("v/state.json", bytes);
    const whole = await backend.readVersioned("v/state.json");
    const opened = await backend.openVersionedReader!("v/state.json", { maxBytes: 300_000 });
    expect(opened.version).toBe(whole.version);
    const chunks: Buffer[] = [];
    const into = Buffer.alloc(65_536);
    for (let length = await opened.reader.read(into); length > 0; ) {
      chunks.push(Buffer.from(into.subarray(0, length)));
      length = await opened.reader.read(into);
    }
    opened.reader.close();
    expect(Buffer.concat(chunks)).toEqual(bytes);
    await expectStorageError(
      backend.openVersionedReader!("v/state.json", { maxBytes: 299_999 }),
      "limit_exceeded",
    );
    await expectStorageError(backend.openVersionedReader!("v/none.json"), "not_found");
  });

  it("walks bare on request: names, kinds and sizes as a full walk gives them, no date or version", async () => {
    await backend.writeFile("b/one.txt", "one");
    await backend.writeFile("b/deep/two.txt", "two!");
    const full = await backend.walk("b", { recursive: true, limit: 10 });
    const bare = await backend.walk("b", { recursive: true, limit: 10, bare: true });
    expect(full.find((entry) => entry.path === "b/one.txt")?.version).toEqual(expect.any(String));
    expect(bare).toEqual(full.map(({ path, kind, size }) => ({ path, kind, size })));
  });

  it("walks a directory larger than one directory read, closing it on limits and aborts", async () => {
    const wide = join(root, "wide");
    await mkdir(join(wide, "zz-sub"), { recursive: true });
    const names = Array.from({ length: 2600 }, (_, index) => `f${String(index).padStart(4, "0")}`);
    for (let start = 0; start < names.length; start += 200) {
      await Promise.all(
        names.slice(start, start + 200).map((name) => writeFile(join(wide, name), name)),
      );
    }
    await writeFile(join(wide, "zz-sub", "inner.txt"), "inner");
    const entries = await backend.walk("wide", { recursive: true, limit: 5000 });
    expect(entries.map((entry) => entry.path)).toEqual([
      ...names.map((name) => `wide/${name}`),
      "wide/zz-sub",
      "wide/zz-sub/inner.txt",
    ]);
    expect(entries[0]).toMatchObject({ kind: "file", size: 5 });
    // Open descriptors, where the platform lists them (Linux).
    const open = async () => (await readdir("/proc/self/fd").catch(() => [])).length;
    const before = await open();
    await expectStorageError(
      backend.walk("wide", { recursive: true, limit: 1500 }),
      "limit_exceeded",
    );
    expect(await open()).toBe(before);

    // The reads are synchronous, yet the walk gives the event loop turns: an abort requested
    // while it runs stops it with the signal's reason, and its directory is closed.
    const controller = new AbortController();
    const walking = backend.walk("wide", {
      recursive: true,
      limit: 5000,
      signal: controller.signal,
    });
    const reason = new Error("stopped by the test");
    setImmediate(() => controller.abort(reason));
    await expect(walking).rejects.toBe(reason);
    expect(await open()).toBe(before);
  });

  describe("writes that fail side by side in directories they made", () => {
    /** A source that yields one chunk, then fails when `fail()` is called. */
    const stalled = () => {
      let fail: () => void = () => undefined;
      const failed = new Promise<void>((resolve) => {
        fail = resolve;
      });
      async function* source(): AsyncGenerator<Uint8Array> {
        yield Buffer.from("partial");
        await failed;
        throw new Error("source failed");
      }
      return { source: source(), fail };
    };
    /**
     * Starts writes of `paths` that stall with their temp files open: the first alone, so that
     * it makes the directories, then the others beside it.
     */
    const start = async (paths: string[]) => {
      const sources = paths.map(() => stalled());
      const started = (index: number) =>
        backend.writeFile(paths[index]!, sources[index]!.source).then(
          () => "written",
          () => "failed",
        );
      const temps = async (count: number) => {
        for (;;) {
          const names = await readdir(join(root, "fresh", "deep")).catch(() => []);
          if (names.length === count) return;
          await new Promise((resolve) => setTimeout(resolve, 1));
        }
      };
      const writes = [started(0)];
      await temps(1);
      for (let index = 1; index < paths.length; index++) writes.push(started(index));
      await temps(paths.length);
      return { sources, writes };
    };
    const paths = Array.from({ length: 6 }, (_, index) => `fresh/deep/${index}.txt`);

    it("leave none of those directories behind when the one that made them fails first", async () => {
      const { sources, writes } = await start(paths);
      for (const [index, { fail }] of sources.entries()) {
        fail();
        expect(await writes[index]).toBe("failed");
      }
      expect(await readdir(root)).toEqual([]);
    });

    it("keep a directory one of them wrote an output into, and one they did not make", async () => {
      const { sources, writes } = await start(paths.slice(1));
      await backend.writeFile(paths[0]!, "done");
      for (const { fail } of sources) fail();
      expect(await Promise.all(writes)).toEqual(Array(5).fill("failed"));
      expect(await readdir(join(root, "fresh", "deep"))).toEqual(["0.txt"]);
      // An empty directory that was there before the writes is not theirs to remove.
      await mkdir(join(root, "kept"));
      const inKept = stalled();
      const failing = backend.writeFile("kept/a.txt", inKept.source).catch(() => "failed");
      while ((await readdir(join(root, "kept"))).length === 0) {
        await new Promise((resolve) => setTimeout(resolve, 1));
      }
      inKept.fail();
      expect(await failing).toBe("failed");
      expect(await readdir(join(root, "kept"))).toEqual([]);
    });
  });

  it("leaves emptied directories in place without pruneEmptyDirs", async () => {
    await backend.writeFile("bundle/nested/a.txt", "a");
    await backend.deletePaths("bundle", ["nested/a.txt"]);
    expect(await readdir(join(root, "bundle"))).toEqual(["nested"]);
    expect(await backend.walk("", { recursive: true, limit: 10 })).toMatchObject([
      { path: "bundle", kind: "directory" },
      { path: "bundle/nested", kind: "directory" },
    ]);
    expect(await backend.hasAny("bundle")).toBe(true);
    expect(await backend.hasAny("bundle/nested")).toBe(false);
  });

  describe("symlinks", () => {
    beforeEach(async () => {
      // An ancestor directory that is a symlink leading out of the root.
      await symlink(outside, join(root, "linked-dir"));
      // A file that is a symlink to a file outside the root.
      await symlink(join(outside, "secret.txt"), join(root, "linked-file.txt"));
      await mkdir(join(root, "real"));
      await symlink(outside, join(root, "real", "nested-link"));
    });

    const refused = async (promise: Promise<unknown>): Promise<void> => {
      const error = await expectStorageError(promise, "unsupported");
      expect(error.message).toContain("symlink");
    };

    it("refuses reads through a symlinked ancestor or of a symlinked file", async () => {
      for (const path of [
        "linked-dir/secret.txt",
        "linked-file.txt",
        "real/nested-link/secret.txt",
      ]) {
        await refused(backend.readFile(path));
        await refused(backend.openRead(path));
        await refused(readFileChunks(backend, path, () => undefined));
        await refused(backend.stat(path));
      }
      await refused(backend.stat("linked-dir"));
    });

    it("refuses writes through a symlinked ancestor or onto a symlinked file", async () => {
      await refused(backend.writeFile("linked-dir/new.txt", "x"));
      await refused(backend.writeFile("linked-dir/deeper/new.txt", "x"));
      await refused(backend.writeFile("linked-dir/secret.txt", "overwritten", { overwrite: true }));
      await refused(backend.writeFile("linked-file.txt", "overwritten", { overwrite: true }));
      await refused(backend.writeFile("real/nested-link/secret.txt", "x", { overwrite: true }));
      expect(await readdir(outside)).toEqual(["secret.txt"]);
      expect(await readFile(join(outside, "secret.txt"), "utf8")).toBe("outside bytes");
      expect((await lstat(join(root, "linked-file.txt"))).isSymbolicLink()).toBe(true);
    });

    it("refuses an ancestor swapped for a symlink after the backend verified it", async () => {
      // The backend remembers directories it verified; a swap above or at one must not be
      // followed. a/b/c is verified by the first writes, then a/b is moved out of the root and
      // replaced by a symlink, once to the moved directory and once to another one.
      await backend.writeFile("a/b/c/first.txt", "1");
      await backend.writeFile("a/b/second.txt", "2");
      await rename(join(root, "a", "b"), join(outside, "moved"));
      await symlink(join(outside, "moved"), join(root, "a", "b"));
      await refused(backend.writeFile("a/b/c/third.txt", "3"));
      await refused(backend.writeFile("a/b/fourth.txt", "4"));
      await refused(backend.readFile("a/b/c/first.txt"));
      await rm(join(root, "a", "b"));
      await mkdir(join(outside, "other", "c"), { recursive: true });
      await symlink(join(outside, "other"), join(root, "a", "b"));
      await refused(backend.writeFile("a/b/c/third.txt", "3"));
      await refused(backend.stat("a/b/c"));
      expect(await readdir(join(outside, "moved", "c"))).toEqual(["first.txt"]);
      expect(await readdir(join(outside, "other", "c"))).toEqual([]);
      // A real directory put back is accepted again.
      await rm(join(root, "a", "b"));
      await mkdir(join(root, "a", "b", "c"), { recursive: true });
      await backend.writeFile("a/b/c/third.txt", "3");
      expect(await text("a/b/c/third.txt")).toBe("3");
    });

    it("refuses deletes through a symlinked ancestor or of a symlinked file", async () => {
      await refused(backend.deletePaths("linked-dir", ["secret.txt"]));
      await refused(backend.deletePaths("", ["linked-file.txt"], { ignoreMissing: true }));
      await refused(
        backend.deletePaths("linked-dir", [".distributor.json"], { ignoreMissing: true }),
      );
      await refused(backend.deletePrefix("linked-dir"));
      await refused(backend.deletePrefix("linked-file.txt"));
      await refused(backend.deletePrefix("linked-dir/secret.txt"));
      expect(await readFile(join(outside, "secret.txt"), "utf8")).toBe("outside bytes");
      expect((await lstat(join(root, "linked-dir"))).isSymbolicLink()).toBe(true);
    });

    it("refuses walks and hasAny through a symlink, and lists the symlinks a walk meets", async () => {
      await refused(backend.walk("linked-dir", { recursive: true, limit: 10 }));
      await refused(backend.hasAny("linked-dir"));
      await refused(backend.hasAny("linked-file.txt"));
      const entries = await backend.walk("", { recursive: true, limit: 10 });
      // Listed, never followed: nothing of `outside` appears.
      expect(entries.map((entry) => `${entry.kind} ${entry.path}`)).toEqual([
        "symlink linked-dir",
        "symlink linked-file.txt",
        "directory real",
        "symlink real/nested-link",
      ]);
      expect(await backend.walk("real", { limit: 10 })).toMatchObject([
        { path: "real/nested-link", kind: "symlink", size: 0 },
      ]);
    });

    it("counts a symlink as content and deletePrefix unlinks it without following", async () => {
      expect(await backend.hasAny("real")).toBe(true);
      await backend.deletePrefix("real");
      await backend.deletePrefix("");
      expect(await readdir(root)).toEqual([]);
      expect(await readdir(outside)).toEqual(["secret.txt"]);
      expect(await readFile(join(outside, "secret.txt"), "utf8")).toBe("outside bytes");
    });
  });

  describe("atomic writes", () => {
    it("leaves neither a partial target nor a temp file when the source fails", async () => {
      await mkdir(join(root, "out"));
      await writeFile(join(root, "out", "existing.txt"), "existing");
      async function* failing(): AsyncGenerator<Uint8Array> {
        yield Buffer.alloc(256 * 1024, 0x61);
        throw new Error("source broke");
      }
      const error = await expectStorageError(
        backend.writeFile("out/new.txt", failing()),
        "unavailable",
      );
      expect(error.message).toContain("source broke");
      expect(error.operation).toBe("write stream");
      await expectStorageError(
        backend.writeFile("out/existing.txt", failing(), { overwrite: true }),
        "unavailable",
      );
      expect(await readdir(join(root, "out"))).toEqual(["existing.txt"]);
      expect(await readFile(join(root, "out", "existing.txt"), "utf8")).toBe("existing");
    });

    it("blames a failing source file stream, not the target, and leaves nothing", async () => {
      // The source's own ENOENT / EACCES must not read as "the target is missing / forbidden".
      const source = createReadStream(join(outside, "no-such-source.txt"));
      const error = await expectStorageError(
        backend.writeFile("out/new.txt", source),
        "unavailable",
      );
      expect(error.message).toContain("source stream failed");
      expect(error.path).toBe("out/new.txt");
      expect(source.destroyed).toBe(true);
      expect(await readdir(root)).toEqual([]);
    });

    it("removes the directories a failed write created", async () => {
      async function* failing(): AsyncGenerator<Uint8Array> {
        yield Buffer.from("x");
        throw new Error("source broke");
      }
      await backend.writeFile("keep/a.txt", "a");
      await expectStorageError(
        backend.writeFile("keep/new/deeper/b.txt", failing()),
        "unavailable",
      );
      expect(await readdir(root)).toEqual(["keep"]);
      expect(await readdir(join(root, "keep"))).toEqual(["a.txt"]);
    });

    it("leaves no temp file after successful writes", async () => {
      await backend.writeFile("dir/a.txt", "a");
      await backend.writeFile("dir/a.txt", "b", { overwrite: true });
      await expectStorageError(backend.writeFile("dir/a.txt", "c"), "already_exists");
      expect(await readdir(join(root, "dir"))).toEqual(["a.txt"]);
    });

    it("replaces by rename, so a reader holding the old file keeps the old bytes", async () => {
      await backend.writeFile("report.txt", "old version");
      const reader = await backend.openRead("report.txt");
      await backend.writeFile("report.txt", "new version", { overwrite: true });
      const chunks: Buffer[] = [];
      for await (const chunk of reader) chunks.push(chunk as Buffer);
      expect(Buffer.concat(chunks).toString()).toBe("old version");
      expect(await text("report.txt")).toBe("new version");
    });

    it("lets exactly one of several concurrent no-clobber writes win", async () => {
      const bodies = Array.from({ length: 6 }, (_, index) => `writer ${index} `.repeat(1000));
      const results = await Promise.allSettled(
        bodies.map((body) => backend.writeFile("contested.txt", body)),
      );
      const winners = results.flatMap((result, index) =>
        result.status === "fulfilled" ? [index] : [],
      );
      expect(winners).toHaveLength(1);
      for (const result of results) {
        if (result.status === "rejected") {
          expect(result.reason).toMatchObject({ kind: "already_exists" });
        }
      }
      expect(await text("contested.txt")).toBe(bodies[winners[0]!]);
      expect(await readdir(root)).toEqual(["contested.txt"]);
    });

    it("writes a file whose name uses the full 255 bytes", async () => {
      const name = "n".repeat(255);
      await backend.writeFile(name, "long name");
      await backend.writeFile(name, "replaced", { overwrite: true });
      expect(await text(name)).toBe("replaced");
      expect(await readdir(root)).toEqual([name]);
    });
  });

  it("destroys an open reader whose signal fires mid-read", async () => {
    await writeFile(join(root, "big.bin"), Buffer.alloc(4 * 1024 * 1024, 0x62));
    const controller = new AbortController();
    const reader = await backend.openRead("big.bin", { signal: controller.signal });
    let received = 0;
    const reading = (async () => {
      for await (const chunk of reader) {
        received += (chunk as Buffer).length;
        controller.abort();
      }
    })();
    await expect(reading).rejects.toMatchObject({ name: "AbortError" });
    expect(received).toBeGreaterThan(0);
    expect(received).toBeLessThan(4 * 1024 * 1024);
    expect(reader.destroyed).toBe(true);
  });

  describe("file and directory clashes", () => {
    it("refuses a write below a file with conflict", async () => {
      await backend.writeFile("a", "file");
      const error = await expectStorageError(backend.writeFile("a/b/c.txt", "x"), "conflict");
      expect(error.message).toContain('"a" is a file');
    });

    it("refuses to write onto or read a directory", async () => {
      await backend.writeFile("d/x.txt", "x");
      await expectStorageError(backend.writeFile("d", "x", { overwrite: true }), "unsupported");
      await expectStorageError(backend.writeFile("d", "x"), "unsupported");
      await expectStorageError(backend.readFile("d"), "unsupported");
      await expectStorageError(backend.openRead("d"), "unsupported");
      await expectStorageError(
        readFileChunks(backend, "d", () => undefined),
        "unsupported",
      );
    });

    it("lists names no logical path can hold escaped, with the problem, and never descends", async () => {
      await writeFile(join(root, "back\\slash"), "x");
      await mkdir(Buffer.from(`${root}/sub\xff`, "latin1"));
      await writeFile(Buffer.from(`${root}/sub\xff/manifest.json`, "latin1"), "{}");
      await writeFile(Buffer.from(`${root}/f\xfe.txt`, "latin1"), "odd");
      await writeFile(join(root, "tab\there"), "t");
      const entries = await backend.walk("", { recursive: true, limit: 10 });
      expect(entries.map((e) => [e.kind, e.path, e.nameProblem])).toEqual([
        ["file", "back\\\\slash", "name contains a backslash"],
        ["file", "f\\xfe.txt", "name is not valid UTF-8"],
        ["directory", "sub\\xff", "name is not valid UTF-8"],
        ["file", "tab\\x09here", "name contains a control character"],
      ]);
      expect(await backend.hasAny("")).toBe(true);
      // The escaped form is never a valid logical path, so it cannot be operated on by mistake.
      await expectStorageError(backend.readFile(entries[1]!.path), "invalid_path");
    });

    it("deletePrefix with keep removes empty directories, symlinks and odd names too", async () => {
      await mkdir(join(root, "bundle", "empty"), { recursive: true });
      await writeFile(join(root, "bundle", "kept.txt"), "k");
      await writeFile(Buffer.from(`${root}/bundle/f\xfe.txt`, "latin1"), "odd");
      await symlink(outside, join(root, "bundle", "link"));
      await backend.deletePrefix("bundle", { keep: ["kept.txt"] });
      expect(await readdir(join(root, "bundle"))).toEqual(["kept.txt"]);
      expect(await readdir(outside)).toEqual(["secret.txt"]);
    });

    it("deletePrefix removes entries whose names are not UTF-8", async () => {
      await mkdir(join(root, "bundle"));
      await writeFile(Buffer.from(`${root}/bundle/f\xfe.txt`, "latin1"), "odd");
      await mkdir(Buffer.from(`${root}/bundle/d\xff`, "latin1"));
      await backend.deletePrefix("bundle");
      expect(await readdir(root)).toEqual([]);
    });
  });

  it("refuses every operation on a root that is a file, naming the root", async () => {
    const fileRoot = join(dir, "root-file");
    await writeFile(fileRoot, "not a directory");
    const onFile = createLocalBackend({ root: fileRoot });
    for (const call of [
      () => onFile.readFile(".distributor.json"),
      () => onFile.stat("a.txt"),
      () => onFile.hasAny(""),
      () => onFile.walk("", { limit: 10 }),
      () => onFile.writeFile("a.txt", "x"),
      () => onFile.deletePrefix(""),
    ]) {
      const error = await expectStorageError(call(), "conflict");
      expect(error.message).toContain(`root ${fileRoot} is not a directory`);
    }
    expect(await readFile(fileRoot, "utf8")).toBe("not a directory");
  });

  it("changes the version when a file is edited in place, so a compare-and-swap refuses", async () => {
    const { version } = await backend.writeFile("state.json", "one");
    await writeFile(join(root, "state.json"), "edited by hand");
    expect((await backend.stat("state.json")).version).not.toBe(version);
    await expectStorageError(
      backend.writeFile("state.json", "two", { ifMatch: version }),
      "conflict",
    );
    expect(await readFile(join(root, "state.json"), "utf8")).toBe("edited by hand");
  });

  it("lets exactly one of many concurrent compare-and-swaps of one version win", async () => {
    const { version } = await backend.writeFile("lease.json", "start");
    const outcomes = await Promise.allSettled(
      Array.from({ length: 12 }, (_, index) =>
        backend.writeFile("lease.json", `swap ${index}`, { ifMatch: version }),
      ),
    );
    const winners = outcomes.flatMap((o, index) => (o.status === "fulfilled" ? [index] : []));
    expect(winners).toHaveLength(1);
    expect(await readFile(join(root, "lease.json"), "utf8")).toBe(`swap ${winners[0]}`);
    expect(await readdir(root)).toEqual(["lease.json"]);
  });

  it("streams into a reserved temp name beside the target and leaves none behind", async () => {
    let seen: string[] = [];
    async function* slow(): AsyncGenerator<Uint8Array> {
      yield Buffer.from("first");
      seen = await readdir(join(root, "out"));
      yield Buffer.from("second");
    }
    await backend.writeFile("out/file.txt", slow());
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatch(/^\.distributor\.[0-9a-f]{16}\.tmp$/);
    expect(await readdir(join(root, "out"))).toEqual(["file.txt"]);
  });

  it("fails every operation with unavailable after close", async () => {
    await backend.writeFile("a.txt", "a");
    await backend.close();
    await expectStorageError(backend.readFile("a.txt"), "unavailable");
    await expectStorageError(backend.deletePrefix(""), "unavailable");
    await expectStorageError(
      readFileChunks(backend, "a.txt", () => undefined),
      "unavailable",
    );
    expect(await readdir(root)).toEqual(["a.txt"]);
  });

  it("reads chunks into one reused buffer through its ByteReader, without a stream", async () => {
    const bytes = Buffer.alloc(700 * 1024);
    for (let index = 0; index < bytes.length; index++) bytes[index] = (index * 31) % 251;
    await writeFile(join(root, "chunked.bin"), bytes);
    expect(backend.openReader).toBeTypeOf("function");
    const memories = new Set<ArrayBufferLike>();
    const copies: Buffer[] = [];
    await readFileChunks(backend, "chunked.bin", (chunk) => {
      memories.add(chunk.buffer);
      copies.push(Buffer.from(chunk));
      return undefined;
    });
    expect(copies.length).toBeGreaterThan(1);
    expect(memories.size).toBe(1);
    expect(Buffer.concat(copies).equals(bytes)).toBe(true);
  });

  it("lets timers run while a large file is copied or hashed through a reader", async () => {
    await writeFile(join(root, "large.bin"), Buffer.alloc(40 * 1024 * 1024, 0x61));
    // Without fsync nothing in the copy waits on the thread pool: only the loop's turns let the
    // timer run.
    const unflushed = createLocalBackend({ root, fsync: false });
    let ticks = 0;
    const timer = setInterval(() => ticks++, 0);
    try {
      const reader = await unflushed.openReader?.("large.bin");
      if (reader === undefined) throw new Error("the local backend has openReader");
      let before = ticks;
      await unflushed.writeFile("copy.bin", reader);
      expect(ticks).toBeGreaterThan(before);
      before = ticks;
      await readFileChunks(unflushed, "copy.bin", () => undefined);
      expect(ticks).toBeGreaterThan(before);
    } finally {
      clearInterval(timer);
      await unflushed.close();
    }
    expect((await stat(join(root, "copy.bin"))).size).toBe(40 * 1024 * 1024);
  });

  it("reads on past the size seen at open when the file grew meanwhile", async () => {
    await writeFile(join(root, "growing.txt"), "first");
    const reader = await backend.openReader?.("growing.txt");
    await appendFile(join(root, "growing.txt"), " and more");
    const into = new Uint8Array(64);
    const parts: string[] = [];
    for (;;) {
      const length = (await reader?.read(into)) ?? 0;
      if (length === 0) break;
      parts.push(Buffer.from(into.subarray(0, length)).toString("utf8"));
    }
    reader?.close();
    expect(parts.join("")).toBe("first and more");
    await expect(
      (async () => {
        const again = await backend.openReader?.("growing.txt");
        try {
          await again?.read(new Uint8Array(0));
        } finally {
          again?.close();
        }
      })(),
    ).rejects.toBeInstanceOf(RangeError);
  });

  it("fails a closed reader's reads and refuses readers of symlinks and directories", async () => {
    await writeFile(join(root, "r.txt"), "reader bytes");
    const reader = await backend.openReader?.("r.txt");
    expect(reader).toBeDefined();
    const into = new Uint8Array(64);
    const length = (await reader?.read(into)) ?? 0;
    expect(Buffer.from(into.subarray(0, length)).toString("utf8")).toBe("reader bytes");
    expect(await reader?.read(into)).toBe(0);
    reader?.close();
    reader?.close();
    await expectStorageError(reader?.read(into) ?? Promise.resolve(), "unavailable");
    await symlink(join(outside, "secret.txt"), join(root, "link.txt"));
    const error = await expectStorageError(
      backend.openReader?.("link.txt") ?? Promise.resolve(),
      "unsupported",
    );
    expect(error.message).toContain("symlink");
    await mkdir(join(root, "d"));
    await expectStorageError(backend.openReader?.("d") ?? Promise.resolve(), "unsupported");
  });

  it("rejects a malformed walk limit with RangeError", async () => {
    await expect(backend.walk("", { limit: -1 })).rejects.toBeInstanceOf(RangeError);
  });
});
