import { mkdir, symlink } from "node:fs/promises";
import { join } from "node:path";
import { createLocalBackend, createMemoryBackend, isStorageError } from "@distributor/storage";
import { afterEach, describe, expect, it } from "vitest";
import { discoverBundles } from "../src/discover.js";
import { BundleValidationError } from "../src/errors.js";
import { rejectionOf, TempDirs, writeBundle, writeTree } from "./helpers.js";

const FILES = { "report.md": "# Report\nSunny.\n" };

const temp = new TempDirs();
afterEach(() => temp.cleanup());

describe("discoverBundles", () => {
  it("finds every bundle, ordered by root-relative path", async () => {
    const root = await temp.make();
    await writeBundle(root, "source/weather/2026", FILES);
    await writeBundle(root, "source/alpha", FILES);
    await writeTree(root, {
      "source/notes/readme.txt": "not a bundle",
      "elsewhere/manifest.json": "{}",
    });
    await writeTree(root, { "source/weather/2026/deep/data.csv": "x" });
    const bundles = await discoverBundles(createLocalBackend({ root }), "source");
    expect(bundles.map(({ entries: _, ...bundle }) => bundle)).toEqual([
      { path: "alpha", bundlePath: "source/alpha", manifestPath: "source/alpha/manifest.json" },
      {
        path: "weather/2026",
        bundlePath: "source/weather/2026",
        manifestPath: "source/weather/2026/manifest.json",
      },
    ]);
    // Each bundle carries what the walk listed below it, for validation to reuse.
    expect(bundles.map((bundle) => bundle.entries.map((entry) => entry.path))).toEqual([
      ["source/alpha/manifest.json", "source/alpha/report.md"],
      [
        "source/weather/2026/deep",
        "source/weather/2026/deep/data.csv",
        "source/weather/2026/manifest.json",
        "source/weather/2026/report.md",
      ],
    ]);
  });

  it("orders by UTF-8 bytes of the path", async () => {
    const root = await temp.make();
    for (const path of ["a/b", "a-b", "\u{1d44e}", "\uff41"]) await writeBundle(root, path, FILES);
    const bundles = await discoverBundles(createLocalBackend({ root }), "");
    expect(bundles.map((bundle) => bundle.path)).toEqual(["a-b", "a/b", "\uff41", "\u{1d44e}"]);
  });

  it('reports the root itself as the bundle ""', async () => {
    const root = await temp.make();
    await writeBundle(root, "in", FILES);
    const backend = createLocalBackend({ root });
    expect(await discoverBundles(backend, "in")).toMatchObject([
      { path: "", bundlePath: "in", manifestPath: "in/manifest.json" },
    ]);
    const [atRoot] = await discoverBundles(createLocalBackend({ root: join(root, "in") }), "");
    expect(atRoot).toMatchObject({ path: "", bundlePath: "", manifestPath: "manifest.json" });
    expect(atRoot?.entries.map((entry) => entry.path)).toEqual(["manifest.json", "report.md"]);
  });

  it("refuses a bundle nested in another, naming both", async () => {
    const root = await temp.make();
    await writeBundle(root, "a", FILES);
    await writeBundle(root, "a/b/c", FILES);
    await writeBundle(root, "d", FILES);
    const error = await rejectionOf(() => discoverBundles(createLocalBackend({ root }), ""));
    expect(error).toBeInstanceOf(BundleValidationError);
    expect((error as BundleValidationError).issues).toEqual([
      {
        code: "nested_bundle",
        path: "a/b/c",
        message: "bundle a/b/c is nested inside bundle a (bundles never nest)",
      },
    ]);
  });

  it("refuses any manifest below a root bundle", async () => {
    const backend = createMemoryBackend({
      files: { "manifest.json": "{}", "x/y/manifest.json": "{}", "z/manifest.json": "{}" },
    });
    const error = (await rejectionOf(() => discoverBundles(backend, ""))) as BundleValidationError;
    expect(error.issues.map((issue) => issue.message)).toEqual([
      "bundle x/y is nested inside bundle . (bundles never nest)",
      "bundle z is nested inside bundle . (bundles never nest)",
    ]);
    expect(error.message).toMatch(/^bundle \. is invalid \(2 problems\)/);
  });

  it("names the innermost enclosing bundle", async () => {
    const backend = createMemoryBackend({
      files: { "a/manifest.json": "{}", "a/b/manifest.json": "{}", "a/b/c/manifest.json": "{}" },
    });
    const error = (await rejectionOf(() => discoverBundles(backend, ""))) as BundleValidationError;
    expect(error.issues.map((issue) => issue.message)).toEqual([
      "bundle a/b is nested inside bundle a (bundles never nest)",
      "bundle a/b/c is nested inside bundle a/b (bundles never nest)",
    ]);
  });

  it("does not take a directory named manifest.json for a bundle", async () => {
    const root = await temp.make();
    await mkdir(join(root, "x", "manifest.json"), { recursive: true });
    await writeTree(root, { "x/manifest.json/file.txt": "x" });
    expect(await discoverBundles(createLocalBackend({ root }), "")).toEqual([]);
  });

  it("returns nothing for an empty or missing root", async () => {
    const root = await temp.make();
    const backend = createLocalBackend({ root });
    expect(await discoverBundles(backend, "")).toEqual([]);
    expect(await discoverBundles(backend, "absent")).toEqual([]);
  });

  it("bounds the walk", async () => {
    const root = await temp.make();
    const files: Record<string, string> = {};
    for (let index = 0; index < 20; index++) files[`many/${index}.txt`] = "x";
    await writeTree(root, files);
    const error = await rejectionOf(() =>
      discoverBundles(createLocalBackend({ root }), "", { limit: 10 }),
    );
    expect(isStorageError(error, "limit_exceeded")).toBe(true);
  });

  it("reports a symlink under the source root as a refused entry", async () => {
    const root = await temp.make();
    await writeBundle(root, "b", FILES);
    await symlink(join(root, "b"), join(root, "link"));
    const error = (await rejectionOf(() =>
      discoverBundles(createLocalBackend({ root }), ""),
    )) as BundleValidationError;
    expect(error.issues.map((issue) => [issue.code, issue.path])).toEqual([
      ["unsupported_entry", "link"],
    ]);
  });

  it("refuses an invalid root prefix before any IO", async () => {
    const backend = createMemoryBackend();
    const error = await rejectionOf(() => discoverBundles(backend, "../up"));
    expect(isStorageError(error, "invalid_path")).toBe(true);
  });
});
