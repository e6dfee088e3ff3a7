import { describe, expect, it } from "vitest";
import { type ContractContext, expectKind } from "./context.js";

/**
 * Deleting: `deletePaths` (every target checked before anything goes, fenced by version with
 * `ifMatch`, empty parents pruned on request) and `deletePrefix`, bounded to its prefix.
 */
export function describeDeletes(contract: ContractContext): void {
  const { backend, put, readText, tree, files } = contract;
  describe("deletePaths", () => {
    const bundle = {
      "bundle/report.md": "md",
      "bundle/nested/deep/report.html": "html",
      "bundle/.distributor.json": "{}",
      "bundle/unmanaged.txt": "keep me",
      "bundle-sibling/report.md": "sibling",
    };

    it("removes the paths given and nothing else", async () => {
      await put(bundle);
      await backend().deletePaths("bundle", ["report.md", "nested/deep/report.html"], {
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

    it("removes a state file listed last with the others", async () => {
      await put(bundle);
      await backend().deletePaths(
        "bundle",
        ["report.md", "nested/deep/report.html", ".distributor.json"],
        { pruneEmptyDirs: true },
      );
      expect(await tree()).toEqual([
        "d bundle",
        "d bundle-sibling",
        "f bundle-sibling/report.md 7",
        "f bundle/unmanaged.txt 7",
      ]);
    });

    it("prunes emptied directories up to, but never including, the root", async () => {
      await put({ "bundle/nested/deep/report.html": "html", "bundle/.distributor.json": "{}" });
      await backend().deletePaths("bundle", ["nested/deep/report.html", ".distributor.json"], {
        pruneEmptyDirs: true,
      });
      expect(await tree()).toEqual([]);
      expect(await backend().hasAny("")).toBe(false);
      await backend().writeFile("again.txt", "root still usable");
      expect(await readText("again.txt")).toBe("root still usable");
    });

    it("works on the root as bundle path", async () => {
      await put({ "top.txt": "t", ".distributor.json": "{}", "other.txt": "o" });
      await backend().deletePaths("", ["top.txt"]);
      expect(await files()).toEqual([".distributor.json", "other.txt"]);
      await backend().deletePaths("", [".distributor.json"]);
      expect(await files()).toEqual(["other.txt"]);
    });

    it("fails with not_found for a missing target unless ignoreMissing", async () => {
      await put(bundle);
      const error = await expectKind(
        backend().deletePaths("bundle", ["report.md", "missing.txt"]),
        "not_found",
      );
      expect(error.path).toBe("bundle/missing.txt");
      await backend().deletePaths("bundle", ["report.md", "missing.txt"], {
        ignoreMissing: true,
      });
      await expectKind(backend().stat("bundle/report.md"), "not_found");
      await backend().deletePaths("bundle", [".distributor.json"], { ignoreMissing: true });
      await expectKind(backend().deletePaths("bundle", [".distributor.json"]), "not_found");
      await backend().deletePaths("never-existed", ["x", ".distributor.json"], {
        ignoreMissing: true,
      });
    });

    it("deletes a fenced output only at the version given, deleting the others", async () => {
      await put({ "bundle/keep.txt": "k" });
      const { version: stale } = await backend().writeFile("bundle/moved.txt", "one");
      const { version: seen } = await backend().writeFile("bundle/same.txt", "same");
      await backend().writeFile("bundle/moved.txt", "two, written by a newer run", {
        overwrite: true,
      });
      const error = await expectKind(
        backend().deletePaths("bundle", ["moved.txt", "same.txt", "keep.txt"], {
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
      await backend().deletePaths("bundle", ["same.txt"], {
        ignoreMissing: true,
        ifMatch: new Map([["same.txt", seen]]),
      });
      expect(await files()).toEqual(["bundle/moved.txt"]);
    });

    it("refuses a target that is a directory and leaves it intact", async () => {
      await put(bundle);
      const error = await expectKind(
        backend().deletePaths("bundle", ["nested"], { ignoreMissing: true }),
        "unsupported",
      );
      expect(error.path).toBe("bundle/nested");
      await expectKind(backend().deletePaths("", ["bundle", ".distributor.json"]), "unsupported");
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
}
