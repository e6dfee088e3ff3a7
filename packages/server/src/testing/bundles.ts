import { mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { buildManifest, fileDigest, serializeManifest } from "@distributor/bundle";
import { c as createTar } from "tar";

// Bundles as a producer uploads them: written file by file with their manifest, packed by tar's
// own packer (not the bundle package's, whose output the server's tests check).

/** Writes a valid bundle (manifest included) of `files` into `directory`. */
export async function writeBundle(
  directory: string,
  id: string,
  files: Record<string, string>,
  created = "2026-06-04T11:55:00Z",
): Promise<void> {
  for (const [path, content] of Object.entries(files)) {
    await mkdir(dirname(join(directory, path)), { recursive: true });
    await writeFile(join(directory, path), content);
  }
  const manifest = buildManifest({
    id,
    created: new Date(created),
    files: Object.entries(files).map(([path, content]) => ({ path, ...fileDigest(content) })),
  });
  await writeFile(join(directory, "manifest.json"), serializeManifest(manifest));
}

/** Packs the contents of `directory` with tar's own packer (gzip by default). */
export async function packDirectory(directory: string, gzip = true): Promise<Buffer> {
  const names = await readdir(directory);
  const chunks: Buffer[] = [];
  for await (const chunk of createTar({ gzip, cwd: directory, portable: true }, names.sort())) {
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/** A bundle of `files` packed as a gzip tar, written and packed below `root`. */
export async function bundleArchive(
  root: string,
  id: string,
  files: Record<string, string>,
  created?: string,
): Promise<Buffer> {
  const directory = await mkdtemp(join(root, "bundle-"));
  await writeBundle(directory, id, files, created);
  const archive = await packDirectory(directory);
  await rm(directory, { recursive: true, force: true });
  return archive;
}
