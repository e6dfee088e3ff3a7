import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { Readable } from "node:stream";
import type { StorageBackend } from "@distributor/storage";
import { fileDigest } from "../src/digest.js";
import { buildManifest } from "../src/manifest.js";
import { serializeManifest } from "../src/manifest-text.js";
import type { Manifest } from "../src/manifest-types.js";

/** Temporary directories created by a test file; `cleanup` removes them (call it in afterEach). */
export class TempDirs {
  readonly #dirs: string[] = [];

  async make(): Promise<string> {
    const dir = await mkdtemp(join(tmpdir(), "distributor-bundle-"));
    this.#dirs.push(dir);
    return dir;
  }

  async cleanup(): Promise<void> {
    await Promise.all(this.#dirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
  }
}

/** Writes files (by `/`-separated path below `root`), creating directories as needed. */
export async function writeTree(
  root: string,
  files: Record<string, string | Uint8Array>,
): Promise<void> {
  for (const [path, content] of Object.entries(files)) {
    const native = join(root, ...path.split("/"));
    await mkdir(dirname(native), { recursive: true });
    await writeFile(native, content);
  }
}

export interface BundleFixture {
  id?: string;
  created?: string;
}

/** The manifest that lists exactly `files` (content by bundle-relative path). */
export function manifestFor(files: Record<string, string>, fixture: BundleFixture = {}): Manifest {
  return buildManifest({
    id: fixture.id ?? "reports.example",
    created: new Date(fixture.created ?? "2026-06-04T11:55:00Z"),
    files: Object.entries(files).map(([path, content]) => ({ path, ...fileDigest(content) })),
  });
}

/** Writes a valid bundle: the files plus a manifest listing them, under `root/bundlePath`. */
export async function writeBundle(
  root: string,
  bundlePath: string,
  files: Record<string, string>,
  fixture: BundleFixture = {},
): Promise<Manifest> {
  const manifest = manifestFor(files, fixture);
  const prefix = bundlePath === "" ? "" : `${bundlePath}/`;
  const tree: Record<string, string> = { [`${prefix}manifest.json`]: serializeManifest(manifest) };
  for (const [path, content] of Object.entries(files)) tree[`${prefix}${path}`] = content;
  await writeTree(root, tree);
  return manifest;
}

/** Runs `action` and returns what it threw, failing the test when it resolves. */
export async function rejectionOf(action: () => Promise<unknown>): Promise<unknown> {
  try {
    await action();
  } catch (error) {
    return error;
  }
  throw new Error("expected the operation to fail");
}

/**
 * A backend that delegates to `backend` except for the given methods: for injecting faults
 * (a read that fails, a file that grows) into a real backend.
 */
export function withOverrides(
  backend: StorageBackend,
  overrides: Partial<Pick<StorageBackend, "readFile" | "openRead" | "writeFile" | "stat" | "walk">>,
): StorageBackend {
  return {
    name: backend.name,
    location: backend.location,
    readFile: overrides.readFile ?? ((path, options) => backend.readFile(path, options)),
    readVersioned: (path, options) => backend.readVersioned(path, options),
    openRead: overrides.openRead ?? ((path, options) => backend.openRead(path, options)),
    writeFile:
      overrides.writeFile ?? ((path, data, options) => backend.writeFile(path, data, options)),
    stat: overrides.stat ?? ((path, options) => backend.stat(path, options)),
    walk: overrides.walk ?? ((prefix, options) => backend.walk(prefix, options)),
    hasAny: (prefix, options) => backend.hasAny(prefix, options),
    deletePaths: (prefix, paths, options) => backend.deletePaths(prefix, paths, options),
    deletePrefix: (prefix, options) => backend.deletePrefix(prefix, options),
    close: () => backend.close(),
  };
}

/** A file that never stops growing: yields `chunk` forever, calling `onChunk` for each. */
export function endlessStream(chunk: string, onChunk: () => void): Readable {
  return Readable.from(
    (function* () {
      for (;;) {
        onChunk();
        yield Buffer.from(chunk);
      }
    })(),
  );
}
