import { describe, expect, it } from "vitest";
import { type ContractContext, expectKind, summarize } from "./context.js";

/**
 * Looking at what is stored: `stat`, `walk` (sorted, bounded, every kind listed, never followed)
 * and `hasAny`, also past 1 000 entries.
 */
export function describeListing(contract: ContractContext): void {
  const { backend, put, tree, files } = contract;
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
      await expectKind(backend().walk("many", { recursive: true, limit: 1000 }), "limit_exceeded");
    });

    it("deletes more than 1 000 managed outputs in one call", async () => {
      await putMany();
      await backend().writeFile("many/.distributor.json", "{}");
      await backend().writeFile("keep.txt", "k");
      const outputs = paths.map((path) => path.slice("many/".length));
      await backend().deletePaths("many", outputs, { pruneEmptyDirs: true });
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
}
