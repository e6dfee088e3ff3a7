import { mkdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  createLocalBackend,
  createMemoryBackend,
  type StorageBackend,
  StorageError,
} from "@distributor/storage";
import { afterEach, describe, expect, it } from "vitest";
import { fileDigest } from "../src/digest.js";
import { discoverBundles } from "../src/discover.js";
import { BundleValidationError, ManifestError } from "../src/errors.js";
import { buildManifest, parseManifest } from "../src/manifest.js";
import { serializeManifest } from "../src/manifest-text.js";
import {
  MANIFEST_BYTES_PER_FILE,
  MAX_MANIFEST_BYTES,
  manifestByteLimit,
  readManifest,
} from "../src/read-manifest.js";
import {
  type FileCheckProgress,
  type ValidateBundleOptions,
  validateBundle,
} from "../src/validate.js";
import {
  endlessStream,
  manifestFor,
  rejectionOf,
  TempDirs,
  withOverrides,
  writeBundle,
  writeTree,
} from "./helpers.js";

const REPORT = "# Report\nSunny.\n";
const FILES = { "report.md": REPORT, "data/table.csv": "a,b\n1,2\n" };

const temp = new TempDirs();
afterEach(() => temp.cleanup());

async function localBundle(files: Record<string, string> = FILES, bundlePath = "bundle") {
  const root = await temp.make();
  const manifest = await writeBundle(root, bundlePath, files);
  return { root, backend: createLocalBackend({ root }), manifest };
}

async function validationError(
  backend: StorageBackend,
  bundlePath: string,
  options: ValidateBundleOptions = {},
): Promise<BundleValidationError> {
  const error = await rejectionOf(() => validateBundle(backend, bundlePath, options));
  if (!(error instanceof BundleValidationError)) throw error;
  return error;
}

describe("validateBundle", () => {
  it("accepts a valid bundle and reports each file checked", async () => {
    const { backend, manifest } = await localBundle();
    const progress: FileCheckProgress[] = [];
    const result = await validateBundle(backend, "bundle", {
      onFile: (event) => progress.push(event),
    });
    expect(result).toEqual({
      path: "bundle",
      manifest,
      totalSize: 16 + 8,
      unlistedFiles: [],
      warnings: [],
    });
    expect(
      progress.map((event) => [event.path, event.index, event.count, event.ok]).sort(),
    ).toEqual([
      ["data/table.csv", 0, 2, true],
      ["report.md", 1, 2, true],
    ]);
  });

  it("finds the same problems in a listing discovery made as in its own walk", async () => {
    const { root, backend, manifest } = await localBundle();
    await writeFile(join(root, "bundle", "stray.txt"), "unlisted");
    await mkdir(join(root, "bundle", "sub"));
    await writeFile(join(root, "bundle", "sub", ".distributor.json"), "{}");
    await writeFile(join(root, "bundle", "report.md"), "# Report\nRainy.\n");
    const [discovered] = await discoverBundles(backend, "");
    const walked = await validationError(backend, "bundle");
    const reused = await validationError(backend, "bundle", {
      manifest,
      listed: discovered?.entries ?? [],
    });
    expect(reused.issues).toEqual(walked.issues);
    expect(reused.issues.map((issue) => issue.code).sort()).toEqual([
      "forbidden_file",
      "sha256_mismatch",
      "unlisted_file",
    ]);
    // The given listing is bounded like a walk.
    const tooMany = await validationError(backend, "bundle", {
      maxFiles: 2,
      listed: Array.from({ length: 100 }, () => discovered?.entries[0]).filter(
        (e) => e !== undefined,
      ),
    });
    expect(tooMany.issues.map((issue) => issue.code)).toEqual(["too_many_entries"]);
  });

  it("accepts the hand-written example manifest of docs/design/bundles.md", async () => {
    // The manifest is a checked-in file; report.md is written here because the formatter would
    // reflow a Markdown fixture and change its bytes.
    const fixture = fileURLToPath(
      new URL("../test/fixtures/spec-example/manifest.json", import.meta.url),
    );
    const root = await temp.make();
    await writeTree(root, { "manifest.json": await readFile(fixture), "report.md": REPORT });
    const result = await validateBundle(createLocalBackend({ root }), "");
    expect(result.manifest.digest).toBe(
      "sha256:1ff36301a4a3f0f3a51ab8a55059a012213b6c2ee48bf0c7eb378c46bcb49f78",
    );
  });

  it("validates a bundle at the backend root", async () => {
    const { backend } = await localBundle(FILES, "");
    expect((await validateBundle(backend, "")).path).toBe("");
  });

  it("reports a size mismatch with the expected and actual size", async () => {
    const { root, backend } = await localBundle();
    await writeFile(join(root, "bundle", "report.md"), `${REPORT}!`);
    const error = await validationError(backend, "bundle");
    expect(error.code).toBe("size_mismatch");
    expect(error.issues).toEqual([
      {
        code: "size_mismatch",
        path: "report.md",
        message: "report.md: size mismatch: expected 16, got 17",
        expected: 16,
        actual: 17,
      },
    ]);
    expect(error.message).toBe("bundle bundle: report.md: size mismatch: expected 16, got 17");
  });

  it("reports a sha256 mismatch with the expected and actual digest", async () => {
    const { root, backend } = await localBundle();
    const changed = "# Report\nRainy!\n";
    await writeFile(join(root, "bundle", "report.md"), changed);
    const error = await validationError(backend, "bundle");
    const expected = fileDigest(REPORT).sha256;
    const actual = fileDigest(changed).sha256;
    expect(error.issues).toEqual([
      {
        code: "sha256_mismatch",
        path: "report.md",
        message: `report.md: sha256 mismatch: expected ${expected}, got ${actual}`,
        expected,
        actual,
      },
    ]);
  });

  it("reports a missing listed file", async () => {
    const root = await temp.make();
    const manifest = manifestFor({ ...FILES, "missing.md": "gone" });
    await writeTree(root, { "manifest.json": serializeManifest(manifest), ...FILES });
    const error = await validationError(createLocalBackend({ root }), "");
    expect(error.issues).toEqual([
      {
        code: "missing_file",
        path: "missing.md",
        message: "missing.md: listed in manifest.json but missing",
      },
    ]);
  });

  it("reports a listed path that is a directory", async () => {
    const root = await temp.make();
    const manifest = manifestFor({ ...FILES, docs: "x" });
    await writeTree(root, {
      "manifest.json": serializeManifest(manifest),
      ...FILES,
      "docs/inner.txt": "y",
    });
    const error = await validationError(createLocalBackend({ root }), "", {
      unlistedFiles: "ignore",
    });
    expect(error.issues).toEqual([
      {
        code: "not_regular_file",
        path: "docs",
        message: "docs: is a directory, not a regular file",
      },
    ]);
  });

  it("rejects unlisted files by default", async () => {
    const { root, backend } = await localBundle();
    await writeTree(root, { "bundle/extra.txt": "surprise", "bundle/data/more.csv": "x" });
    const error = await validationError(backend, "bundle");
    expect(error.issues.map((issue) => [issue.code, issue.message])).toEqual([
      ["unlisted_file", "data/more.csv: present but not listed in manifest.json"],
      ["unlisted_file", "extra.txt: present but not listed in manifest.json"],
    ]);
    expect(error.code).toBe("bundle_invalid");
    expect(error.message).toBe(
      "bundle bundle is invalid (2 problems): data/more.csv: present but not listed in manifest.json; extra.txt: present but not listed in manifest.json",
    );
  });

  it("finds an unlisted file as many as the listed ones present, whatever the manifest's order", async () => {
    // As many files present as listed, but one listed is missing and one present is not listed.
    const { root, backend, manifest } = await localBundle();
    await rm(join(root, "bundle", "data", "table.csv"));
    await writeTree(root, { "bundle/extra.txt": "surprise" });
    const error = await validationError(backend, "bundle");
    expect(error.issues.map((issue) => [issue.code, issue.path])).toEqual([
      ["missing_file", "data/table.csv"],
      ["unlisted_file", "extra.txt"],
    ]);
    // A manifest handed over by the caller with a path twice counts it once.
    await writeTree(root, { "bundle/data/table.csv": FILES["data/table.csv"] });
    await rm(join(root, "bundle", "extra.txt"));
    const report = manifest.files.find((file) => file.path === "report.md");
    const twice = { ...manifest, files: [report, report] } as typeof manifest;
    const again = await validationError(backend, "bundle", { manifest: twice });
    expect(again.issues.map((issue) => [issue.code, issue.path])).toEqual([
      ["unlisted_file", "data/table.csv"],
    ]);
    // A manifest handed over in another order: the same verdict as in its own order.
    await writeTree(root, { "bundle/extra.txt": "surprise" });
    const reversed = { ...manifest, files: [...manifest.files].reverse() } as typeof manifest;
    const reverse = await validationError(backend, "bundle", { manifest: reversed });
    expect(reverse.issues.map((issue) => [issue.code, issue.path])).toEqual([
      ["unlisted_file", "extra.txt"],
    ]);
  });

  it("accepts unlisted files under unlistedFiles: ignore and reports them", async () => {
    const { root, backend } = await localBundle();
    await writeTree(root, { "bundle/extra.txt": "surprise", "bundle/sub/more.txt": "more" });
    const result = await validateBundle(backend, "bundle", { unlistedFiles: "ignore" });
    expect(result.unlistedFiles).toEqual(["extra.txt", "sub/more.txt"]);
  });

  it("refuses reserved names at any depth, even when unlisted files are ignored", async () => {
    const { root, backend } = await localBundle();
    await writeTree(root, {
      "bundle/.distributor.json": "{}",
      "bundle/sub/.distributor.json": "{}",
      "bundle/sub/.distributor.lease.json": "{}",
      "bundle/deep/x/.distributor.0123456789abcdef.tmp": "partial",
      // Look-alikes are ordinary files.
      "bundle/.distributor.yml": "x",
    });
    for (const unlistedFiles of ["reject", "ignore"] as const) {
      const error = await validationError(backend, "bundle", { unlistedFiles });
      const forbidden = error.issues.filter((issue) => issue.code === "forbidden_file");
      expect(forbidden.map((issue) => issue.path)).toEqual([
        ".distributor.json",
        "deep/x/.distributor.0123456789abcdef.tmp",
        "sub/.distributor.json",
        "sub/.distributor.lease.json",
      ]);
      expect(forbidden[0]?.message).toContain(".distributor.json is reserved");
    }
  });

  it("refuses names that are not UTF-8, shown escaped, wherever they are", async () => {
    const { root, backend } = await localBundle();
    await mkdir(Buffer.from(`${root}/bundle/sub\xff`, "latin1"));
    await writeFile(Buffer.from(`${root}/bundle/sub\xff/manifest.json`, "latin1"), "{}");
    await writeFile(Buffer.from(`${root}/bundle/f\xfe.txt`, "latin1"), "odd");
    for (const unlistedFiles of ["reject", "ignore"] as const) {
      const error = await validationError(backend, "bundle", { unlistedFiles });
      expect(error.issues.map((issue) => [issue.code, issue.message])).toEqual([
        ["invalid_name", "f\\xfe.txt: name is not valid UTF-8"],
        ["invalid_name", "sub\\xff: name is not valid UTF-8"],
      ]);
    }
  });

  it("rejects a nested manifest.json even when unlisted files are ignored", async () => {
    const { root, backend } = await localBundle();
    await writeTree(root, { "bundle/data/manifest.json": "{}" });
    for (const unlistedFiles of ["reject", "ignore"] as const) {
      const error = await validationError(backend, "bundle", { unlistedFiles });
      expect(error.issues).toEqual([
        {
          code: "nested_manifest",
          path: "data/manifest.json",
          message:
            "data/manifest.json: nested manifest.json below the bundle root (bundles never nest)",
        },
      ]);
    }
  });

  it("rejects a symlink inside the bundle, naming it", async () => {
    const { root, backend } = await localBundle();
    await symlink(join(root, "bundle", "report.md"), join(root, "bundle", "link.md"));
    const error = await validationError(backend, "bundle", { unlistedFiles: "ignore" });
    expect(error.issues).toHaveLength(1);
    expect(error.issues[0]?.code).toBe("unsupported_entry");
    expect(error.issues[0]?.path).toBe("link.md");
    expect(error.issues[0]?.message).toBe("link.md: is a symlink; symlinks are refused");
  });

  it("rejects a listed file that is a symlink", async () => {
    const root = await temp.make();
    await writeTree(root, {
      "outside/report.md": REPORT,
      "bundle/manifest.json": serializeManifest(manifestFor({ "report.md": REPORT })),
    });
    await symlink(join(root, "outside", "report.md"), join(root, "bundle", "report.md"));
    const error = await validationError(createLocalBackend({ root }), "bundle");
    expect(error.issues.map((issue) => [issue.code, issue.path])).toEqual([
      ["unsupported_entry", "report.md"],
    ]);
  });

  it("rejects a manifest.json that is a symlink", async () => {
    const root = await temp.make();
    await writeTree(root, { "real.json": serializeManifest(manifestFor(FILES)), ...FILES });
    await symlink(join(root, "real.json"), join(root, "manifest.json"));
    const error = await validationError(createLocalBackend({ root }), "");
    expect(error.code).toBe("not_regular_file");
    expect(error.message).toMatch(/^bundle \.: manifest\.json: not a regular file: .*symlink/);
  });

  it("reports a missing manifest", async () => {
    const root = await temp.make();
    await writeTree(root, { "bundle/report.md": REPORT });
    const error = await validationError(createLocalBackend({ root }), "bundle");
    expect(error.code).toBe("missing_manifest");
    expect(error.message).toContain("manifest.json: not found");
  });

  it("reports an invalid manifest with its path", async () => {
    const root = await temp.make();
    const text = serializeManifest(manifestFor({ "report.md": REPORT })).replace(
      '"schema_version": 1',
      '"schema_version": 2',
    );
    await writeTree(root, { "bundle/manifest.json": text, "bundle/report.md": REPORT });
    const error = await validationError(createLocalBackend({ root }), "bundle");
    expect(error).toBeInstanceOf(ManifestError);
    expect(error.code).toBe("invalid_manifest");
    expect(error.message).toBe("bundle/manifest.json: schema_version must be 1, got 2");
  });

  it("refuses more listed files than maxFiles before reading any file", async () => {
    const root = await temp.make();
    const files = { "a.md": "a", "b.md": "b", "c.md": "c" };
    // Only the manifest exists: reaching the files would report them missing.
    await writeTree(root, { "manifest.json": serializeManifest(manifestFor(files)) });
    const backend = createLocalBackend({ root });
    const error = await validationError(backend, "", { maxFiles: 2 });
    expect(error.issues).toEqual([
      {
        code: "too_many_files",
        path: "manifest.json",
        message:
          "manifest.json: lists 3 files, more than validation.max_files 2; set validation.max_files in the pipeline's configuration to accept more",
        expected: 2,
        actual: 3,
      },
    ]);
    // A producer's client names its own setting, not the pipeline's.
    const named = await validationError(backend, "", {
      maxFiles: 2,
      maxFilesSetting: { name: "--max-files", raise: "pass a larger --max-files" },
    });
    expect(named.issues[0]?.message).toBe(
      "manifest.json: lists 3 files, more than --max-files 2; pass a larger --max-files",
    );
    const missing = await validationError(backend, "", { maxFiles: 3 });
    expect(missing.issues.map((issue) => issue.code)).toEqual([
      "missing_file",
      "missing_file",
      "missing_file",
    ]);
  });

  it("refuses a declared total size above maxTotalSize before reading any file", async () => {
    const root = await temp.make();
    await writeTree(root, { "manifest.json": serializeManifest(manifestFor(FILES)) });
    const error = await validationError(createLocalBackend({ root }), "", { maxTotalSize: 23 });
    expect(error.issues).toEqual([
      {
        code: "total_size_exceeded",
        path: "manifest.json",
        message: "manifest.json: files total 24 bytes, more than validation.max_total_size 23",
        expected: 23,
        actual: 24,
      },
    ]);
    const atLimit = await validationError(createLocalBackend({ root }), "", { maxTotalSize: 24 });
    expect(atLimit.issues.every((issue) => issue.code === "missing_file")).toBe(true);
  });

  it("bounds the walk of a bundle full of unlisted entries", async () => {
    const { root, backend } = await localBundle();
    const strays: Record<string, string> = {};
    for (let index = 0; index < 70; index++) strays[`bundle/stray/${index}.txt`] = "x";
    await writeTree(root, strays);
    const error = await validationError(backend, "bundle", {
      maxFiles: 2,
      unlistedFiles: "ignore",
    });
    expect(error.issues).toEqual([
      {
        code: "too_many_entries",
        path: "",
        message: "bundle holds more than 68 files and directories (validation.max_files is 2)",
        expected: 68,
      },
    ]);
  });

  it("accepts a valid bundle whose directories outnumber the maxFiles-based walk bound", async () => {
    // One file 70 directories deep: 72 entries, more than 2 × maxFiles + 64 = 66 for maxFiles 1.
    const deep = `${Array.from({ length: 70 }, (_, index) => `d${index}`).join("/")}/leaf.txt`;
    const { backend } = await localBundle({ [deep]: "deep" });
    const result = await validateBundle(backend, "bundle", { maxFiles: 1 });
    expect(result.manifest.files.map((file) => file.path)).toEqual([deep]);
  });

  it("collects every problem in one error, ordered by path", async () => {
    const { root, backend } = await localBundle({ ...FILES, "z.md": "zed", "gone.md": "gone" });
    await writeFile(join(root, "bundle", "report.md"), `${REPORT}!`);
    await writeFile(join(root, "bundle", "z.md"), "ZED");
    await writeTree(root, { "bundle/extra.txt": "x", "bundle/nested/manifest.json": "{}" });
    const { rm } = await import("node:fs/promises");
    await rm(join(root, "bundle", "gone.md"));
    const error = await validationError(backend, "bundle");
    expect(error.issues.map((issue) => [issue.path, issue.code])).toEqual([
      ["extra.txt", "unlisted_file"],
      ["gone.md", "missing_file"],
      ["nested/manifest.json", "nested_manifest"],
      ["report.md", "size_mismatch"],
      ["z.md", "sha256_mismatch"],
    ]);
    expect(error.message).toMatch(/^bundle bundle is invalid \(5 problems\): extra\.txt: present/);
  });

  it("works on the memory backend", async () => {
    const manifest = manifestFor(FILES);
    const backend = createMemoryBackend({
      files: {
        "in/manifest.json": serializeManifest(manifest),
        "in/report.md": REPORT,
        "in/data/table.csv": "a,b\n1,2\n",
      },
    });
    expect((await validateBundle(backend, "in")).manifest).toEqual(manifest);
    await backend.writeFile("in/report.md", "changed", { overwrite: true });
    expect((await validationError(backend, "in")).issues[0]?.message).toBe(
      "report.md: size mismatch: expected 16, got 7",
    );
  });

  it("stops reading a file that yields more bytes than listed", async () => {
    const memory = createMemoryBackend({
      files: {
        "manifest.json": serializeManifest(manifestFor({ "report.md": REPORT })),
        "report.md": REPORT,
      },
    });
    let delivered = 0;
    // Fault: the file grows after it was listed, and keeps growing.
    const growing = withOverrides(memory, {
      openRead: async () =>
        endlessStream(REPORT, () => {
          delivered++;
        }),
    });
    const error = await validationError(growing, "");
    expect(error.issues[0]?.message).toBe(
      "report.md: size mismatch: expected 16, got more than 16 (file grew while reading)",
    );
    expect(delivered).toBeLessThan(10);
  });

  it("lets storage failures that say nothing about the bundle propagate", async () => {
    const memory = createMemoryBackend({
      files: {
        "manifest.json": serializeManifest(manifestFor({ "report.md": REPORT })),
        "report.md": REPORT,
      },
    });
    const failing = withOverrides(memory, {
      openRead: async (path: string) => {
        throw new StorageError({
          kind: "unavailable",
          operation: "open reader",
          backend: "memory",
          path,
        });
      },
    });
    const error = await rejectionOf(() => validateBundle(failing, ""));
    expect(error).toBeInstanceOf(StorageError);
    expect(error).not.toBeInstanceOf(BundleValidationError);
  });

  it("hashes at most `concurrency` files at once", async () => {
    const files: Record<string, string> = {};
    for (let index = 0; index < 12; index++) files[`f${index}.txt`] = `file ${index}`;
    const tree: Record<string, string> = {
      "manifest.json": serializeManifest(manifestFor(files)),
      ...files,
    };
    const memory = createMemoryBackend({ files: tree });
    let open = 0;
    let peak = 0;
    const counting = withOverrides(memory, {
      openRead: async (path: string) => {
        const stream = await memory.openRead(path);
        open++;
        peak = Math.max(peak, open);
        stream.once("close", () => open--);
        return stream;
      },
    });
    await validateBundle(counting, "", { concurrency: 3 });
    expect(peak).toBeGreaterThan(0);
    expect(peak).toBeLessThanOrEqual(3);
  });

  it("rejects with the abort reason when the signal fires", async () => {
    const { backend } = await localBundle();
    const controller = new AbortController();
    const reason = new Error("cancelled by operator");
    controller.abort(reason);
    await expect(validateBundle(backend, "bundle", { signal: controller.signal })).rejects.toBe(
      reason,
    );
  });

  it("refuses malformed limits", async () => {
    const { backend } = await localBundle();
    await expect(validateBundle(backend, "bundle", { maxFiles: 0 })).rejects.toThrow(RangeError);
    await expect(validateBundle(backend, "bundle", { maxTotalSize: -1 })).rejects.toThrow(
      RangeError,
    );
  });
});

describe("readManifest", () => {
  it("bounds the bytes it reads", async () => {
    const root = await temp.make();
    await mkdir(join(root, "b"));
    await writeFile(join(root, "b", "manifest.json"), serializeManifest(manifestFor(FILES)));
    const error = await rejectionOf(() =>
      readManifest(createLocalBackend({ root }), "b", { maxBytes: 100 }),
    );
    expect(error).toBeInstanceOf(ManifestError);
    expect((error as Error).message).toBe("b/manifest.json: manifest is larger than 100 bytes");
  });

  it("bounds a manifest by the files its reader accepts: 1 KiB each, at least 16 MiB", async () => {
    expect(manifestByteLimit(undefined)).toBe(MAX_MANIFEST_BYTES);
    expect(manifestByteLimit(10_000)).toBe(MAX_MANIFEST_BYTES);
    expect(manifestByteLimit(100_000)).toBe(100_000 * MANIFEST_BYTES_PER_FILE);
    expect(manifestByteLimit(10_000_000)).toBe(500 * 1024 * 1024);
    // Over 16 MiB of manifest: refused by a reader of 10 000 files, naming the setting; read by
    // one that accepts 20 000.
    const manifest = serializeManifest(manifestFor(FILES));
    const padded = `${manifest.slice(0, -2)}${" ".repeat(17 * 1024 * 1024)}}\n`;
    const backend = createMemoryBackend({ files: { "manifest.json": padded } });
    const error = await rejectionOf(() => readManifest(backend, "", { maxFiles: 10_000 }));
    expect((error as Error).message).toBe(
      "manifest.json: manifest is larger than 16777216 bytes (1024 per file of validation.max_files 10000, at least 16777216); raise validation.max_files to accept a bigger manifest",
    );
    expect((await readManifest(backend, "", { maxFiles: 20_000 })).files).toHaveLength(
      manifestFor(FILES).files.length,
    );
  });

  it("reads a big canonical manifest as parseManifest does, and a non-canonical one by the strict parser", async () => {
    const files = Array.from({ length: 12_000 }, (_, index) => ({
      path: `d/f${String(index).padStart(5, "0")}.txt`,
      sha256: `sha256:${String(index).padStart(64, "0")}`,
      size: index,
    }));
    const manifest = buildManifest({ id: "big", created: new Date("2026-06-04T11:55:00Z"), files });
    const canonical = serializeManifest(manifest);
    // More than one piece of a megabyte: the pieces are read twice (parsed, then compared).
    expect(canonical.length).toBeGreaterThan(1024 * 1024);
    const compact = JSON.stringify(JSON.parse(canonical));
    const duplicated = canonical.replace('"id": "big",', '"id": "big", "id": "big",');
    const backend = createMemoryBackend({
      files: {
        "a/manifest.json": canonical,
        "b/manifest.json": compact,
        "c/manifest.json": duplicated,
      },
    });
    const expected = parseManifest(canonical);
    expect(await readManifest(backend, "a")).toEqual(expected);
    expect(await readManifest(backend, "b")).toEqual(expected);
    await expect(readManifest(backend, "c")).rejects.toThrow('duplicate key "id"');
  });

  it("refuses bytes that are not UTF-8", async () => {
    const backend = createMemoryBackend({
      files: { "manifest.json": new Uint8Array([0x7b, 0xff, 0x7d]) },
    });
    await expect(readManifest(backend, "")).rejects.toThrow(
      "manifest.json: manifest is not valid UTF-8",
    );
  });

  it("reports a byte order mark instead of hiding it", async () => {
    const text = serializeManifest(manifestFor(FILES));
    const backend = createMemoryBackend({ files: { "manifest.json": `\ufeff${text}` } });
    await expect(readManifest(backend, "")).rejects.toThrow("byte order mark before the document");
  });
});
