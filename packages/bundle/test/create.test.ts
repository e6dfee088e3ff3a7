import { readFile, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { addAbortSignal, Readable } from "node:stream";
import { createLocalBackend, createMemoryBackend, StorageError } from "@distributor/storage";
import { afterEach, describe, expect, it } from "vitest";
import { createManifest } from "../src/create.js";
import { fileDigest } from "../src/digest.js";
import { BundleValidationError, ManifestError } from "../src/errors.js";
import { parseManifest } from "../src/manifest.js";
import { serializeManifest } from "../src/manifest-text.js";
import { validateBundle } from "../src/validate.js";
import { endlessStream, rejectionOf, TempDirs, withOverrides, writeTree } from "./helpers.js";

const FILES = {
  "report.md": "# Report\nSunny.\n",
  "data/table.csv": "a,b\n1,2\n",
  "Z-upper.txt": "upper first in byte order\n",
};
const NOW = () => new Date("2026-06-04T11:55:00.789Z");

const temp = new TempDirs();
afterEach(() => temp.cleanup());

async function bundleDir(files: Record<string, string> = FILES) {
  const root = await temp.make();
  await writeTree(
    root,
    Object.fromEntries(Object.entries(files).map(([path, text]) => [`b/${path}`, text])),
  );
  return { root, backend: createLocalBackend({ root }) };
}

async function bundleError(action: () => Promise<unknown>): Promise<BundleValidationError> {
  const error = await rejectionOf(action);
  if (!(error instanceof BundleValidationError)) throw error;
  return error;
}

describe("createManifest", () => {
  it("lists every file sorted with digests and sizes and writes manifest.json", async () => {
    const { root, backend } = await bundleDir();
    const result = await createManifest(backend, "b", { id: "reports.example", now: NOW });
    expect(result.written).toBe(true);
    expect(result.manifestPath).toBe("b/manifest.json");
    expect(result.manifest.files).toEqual([
      { path: "Z-upper.txt", ...fileDigest(FILES["Z-upper.txt"]) },
      { path: "data/table.csv", ...fileDigest(FILES["data/table.csv"]) },
      { path: "report.md", ...fileDigest(FILES["report.md"]) },
    ]);
    const written = await readFile(join(root, "b", "manifest.json"), "utf8");
    expect(written).toBe(serializeManifest(result.manifest));
    // created defaults to now, truncated to whole seconds in UTC.
    expect(written).toContain('"created": "2026-06-04T11:55:00Z"');
    expect(parseManifest(written)).toEqual(result.manifest);
  });

  it("produces a bundle that validates", async () => {
    const { backend } = await bundleDir();
    const { manifest } = await createManifest(backend, "b", { id: "reports.example" });
    const validated = await validateBundle(backend, "b");
    expect(validated.manifest).toEqual(manifest);
    expect(validated.totalSize).toBe(
      Object.values(FILES).reduce((sum, text) => sum + text.length, 0),
    );
  });

  it("defaults created to the current time", async () => {
    const { backend } = await bundleDir();
    const before = Math.floor(Date.now() / 1000) * 1000;
    const { manifest } = await createManifest(backend, "b", { id: "reports.example" });
    expect(manifest.created.getTime()).toBeGreaterThanOrEqual(before);
    expect(manifest.created.getUTCMilliseconds()).toBe(0);
  });

  it("uses an explicit created as given", async () => {
    const { backend } = await bundleDir();
    const created = new Date("2026-01-02T03:04:05.250Z");
    const { manifest } = await createManifest(backend, "b", { id: "reports.example", created });
    expect(manifest.created).toEqual(created);
  });

  it("refuses to overwrite an existing manifest without force", async () => {
    const { root, backend } = await bundleDir();
    await writeTree(root, { "b/manifest.json": "original" });
    const error = await bundleError(() => createManifest(backend, "b", { id: "reports.example" }));
    expect(error.code).toBe("manifest_exists");
    expect(error.message).toBe(
      "bundle b: b/manifest.json already exists; use --force to overwrite it",
    );
    expect(await readFile(join(root, "b", "manifest.json"), "utf8")).toBe("original");
  });

  it("overwrites an existing manifest with force, without listing it", async () => {
    const { root, backend } = await bundleDir();
    await writeTree(root, { "b/manifest.json": "original" });
    const result = await createManifest(backend, "b", {
      id: "reports.example",
      force: true,
      now: NOW,
    });
    expect(result.written).toBe(true);
    expect(result.manifest.files.map((file) => file.path)).not.toContain("manifest.json");
    expect(await readFile(join(root, "b", "manifest.json"), "utf8")).toBe(
      serializeManifest(result.manifest),
    );
  });

  it("reports a manifest that appears while hashing as existing", async () => {
    const memory = createMemoryBackend({ files: { "b/report.md": "x" } });
    // Fault: another producer writes the manifest between the existence check and our write.
    const racing = withOverrides(memory, {
      writeFile: async (path, data, options) => {
        await memory.writeFile(path, "theirs");
        return memory.writeFile(path, data, options);
      },
    });
    const error = await bundleError(() => createManifest(racing, "b", { id: "reports.example" }));
    expect(error.code).toBe("manifest_exists");
    expect(error.cause).toBeInstanceOf(StorageError);
    expect(new TextDecoder().decode(await memory.readFile("b/manifest.json"))).toBe("theirs");
  });

  it("computes without writing on a dry run", async () => {
    const { root, backend } = await bundleDir();
    const result = await createManifest(backend, "b", { id: "reports.example", dryRun: true });
    expect(result.written).toBe(false);
    expect(result.manifest.files).toHaveLength(3);
    await expect(readFile(join(root, "b", "manifest.json"))).rejects.toThrow(/ENOENT/);
  });

  it("refuses symlinks, naming them", async () => {
    const { root, backend } = await bundleDir();
    await symlink(join(root, "b", "report.md"), join(root, "b", "data", "link.md"));
    const error = await bundleError(() => createManifest(backend, "b", { id: "reports.example" }));
    expect(error.issues.map((issue) => [issue.code, issue.path])).toEqual([
      ["unsupported_entry", "data/link.md"],
    ]);
    expect(error.message).toContain("data/link.md: is a symlink; symlinks are refused");
    await expect(readFile(join(root, "b", "manifest.json"))).rejects.toThrow(/ENOENT/);
  });

  it("refuses a root .distributor.json and nested manifests", async () => {
    const { backend } = await bundleDir({
      ...FILES,
      ".distributor.json": "{}",
      "sub/manifest.json": "{}",
    });
    const error = await bundleError(() => createManifest(backend, "b", { id: "reports.example" }));
    expect(error.issues).toEqual([
      {
        code: "forbidden_file",
        path: ".distributor.json",
        message:
          ".distributor.json: .distributor.json is reserved for distributor's own files (state, lease, temp files) and cannot be part of a bundle",
      },
      {
        code: "nested_manifest",
        path: "sub/manifest.json",
        message:
          "sub/manifest.json: nested manifest.json below the bundle root (bundles never nest)",
      },
    ]);
  });

  it("refuses reserved names below the root too, and names that are not UTF-8", async () => {
    const { root, backend } = await bundleDir({ ...FILES, "sub/.distributor.json": "{}" });
    await writeFile(Buffer.from(`${root}/b/odd\xff.txt`, "latin1"), "odd");
    const error = await bundleError(() => createManifest(backend, "b", { id: "reports.example" }));
    expect(error.issues.map((issue) => [issue.code, issue.path])).toEqual([
      ["invalid_name", "odd\\xff.txt"],
      ["forbidden_file", "sub/.distributor.json"],
    ]);
    await expect(readFile(join(root, "b", "manifest.json"))).rejects.toThrow(/ENOENT/);
  });

  it("refuses an invalid id before touching storage", async () => {
    const { root, backend } = await bundleDir();
    const error = await rejectionOf(() => createManifest(backend, "b", { id: "bad id" }));
    expect(error).toBeInstanceOf(ManifestError);
    expect((error as ManifestError).field).toBe("id");
    expect((error as Error).message).toMatch(/^id must match/);
    await expect(readFile(join(root, "b", "manifest.json"))).rejects.toThrow(/ENOENT/);
  });

  it("refuses an empty bundle directory", async () => {
    const root = await temp.make();
    await writeTree(root, { "b/manifest.json": "old" });
    const error = await bundleError(() =>
      createManifest(createLocalBackend({ root }), "b", { id: "reports.example", force: true }),
    );
    expect(error.code).toBe("empty_bundle");
  });

  it("bounds the number of files", async () => {
    const { backend } = await bundleDir();
    const error = await bundleError(() =>
      createManifest(backend, "b", { id: "reports.example", maxFiles: 2 }),
    );
    expect(error.issues).toEqual([
      {
        code: "too_many_files",
        path: "",
        message: "bundle holds 3 files, more than the limit 2",
        expected: 2,
        actual: 3,
      },
    ]);
  });

  it("rejects with the signal's reason when aborted while hashing", async () => {
    const memory = createMemoryBackend({ files: { "b/report.md": "first chunk, then more" } });
    const controller = new AbortController();
    const reason = new Error("cancelled by operator");
    // Fault: the read stalls after its first chunk and the caller gives up meanwhile; the stream
    // is destroyed with a generic AbortError, which must not replace the caller's reason.
    const stalling = withOverrides(memory, {
      openRead: async (_path, options) => {
        let pulls = 0;
        const stream = new Readable({
          read() {
            pulls++;
            if (pulls === 1) this.push(Buffer.from("first chunk"));
            else controller.abort(reason);
          },
        });
        return options?.signal === undefined ? stream : addAbortSignal(options.signal, stream);
      },
    });
    const error = await rejectionOf(() =>
      createManifest(stalling, "b", { id: "reports.example", signal: controller.signal }),
    );
    expect(error).toBe(reason);
    await expect(memory.stat("b/manifest.json")).rejects.toMatchObject({ kind: "not_found" });
  });

  it("stops hashing a file that grows past its listed size", async () => {
    const memory = createMemoryBackend({ files: { "b/report.md": "# Report\n" } });
    let delivered = 0;
    // Fault: the file keeps growing after the listing saw 9 bytes.
    const growing = withOverrides(memory, {
      openRead: async () =>
        endlessStream("# Report\n", () => {
          delivered++;
        }),
    });
    const error = await bundleError(() => createManifest(growing, "b", { id: "reports.example" }));
    expect(error.issues).toEqual([
      {
        code: "size_mismatch",
        path: "report.md",
        message:
          "report.md: changed while the manifest was created: listed 9 bytes, read more than 9",
        expected: 9,
        actual: "more than 9",
      },
    ]);
    expect(delivered).toBeLessThan(10);
    await expect(memory.stat("b/manifest.json")).rejects.toMatchObject({ kind: "not_found" });
  });

  it("refuses a malformed maxFiles", async () => {
    const { backend } = await bundleDir();
    for (const maxFiles of [-1, 1.5, Number.NaN]) {
      await expect(
        createManifest(backend, "b", { id: "reports.example", maxFiles }),
      ).rejects.toThrow(RangeError);
    }
  });

  it("creates a manifest for a bundle at the root of a memory backend", async () => {
    const backend = createMemoryBackend({ files: { "report.md": FILES["report.md"] } });
    const { manifest, manifestPath } = await createManifest(backend, "", {
      id: "reports.example.2026-06-04",
      created: new Date("2026-06-04T11:55:00Z"),
    });
    expect(manifestPath).toBe("manifest.json");
    expect(manifest.digest).toBe(
      "sha256:1ff36301a4a3f0f3a51ab8a55059a012213b6c2ee48bf0c7eb378c46bcb49f78",
    );
    expect((await validateBundle(backend, "")).manifest).toEqual(manifest);
  });

  it("refuses a manifest larger than readers accept, writing nothing, even with force", async () => {
    // 20 000 empty files whose paths are about 1 030 characters: a manifest of about 23 MB,
    // more than the 1 KiB per file (20 MB) that readers allowing 20 001 files accept.
    const directories = ["d", "e", "f", "g", "h"].map((letter) => letter.repeat(200)).join("/");
    const files: Record<string, string> = { "b/manifest.json": "kept as it is\n" };
    for (let index = 0; index < 20_000; index++) {
      files[`b/${directories}/${String(index).padStart(5, "0")}.txt`] = "";
    }
    const backend = createMemoryBackend({ files });
    for (const dryRun of [true, false]) {
      const error = await rejectionOf(() =>
        createManifest(backend, "b", { id: "huge", force: true, dryRun, maxFiles: 20_001 }),
      );
      expect(error).toBeInstanceOf(ManifestError);
      expect((error as ManifestError).field).toBe("files");
      expect((error as Error).message).toMatch(
        /^b\/manifest\.json would be \d+ bytes for 20000 files, more than the 20481024 a manifest of at most 20001 files may have; nothing was written$/,
      );
    }
    expect(Buffer.from(await backend.readFile("b/manifest.json")).toString()).toBe(
      "kept as it is\n",
    );
  }, 60_000);
});
