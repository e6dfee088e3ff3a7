import { createHash } from "node:crypto";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";

export const sha256Of = (bytes: string | Buffer) =>
  `sha256:${createHash("sha256").update(bytes).digest("hex")}`;

/**
 * Writes a bundle into `dir`: `files` and a manifest listing them with the digests of docs/design/bundles.md,
 * computed here independently of `@distributor/bundle`.
 */
export async function writeBundle(
  dir: string,
  files: Record<string, string | Buffer>,
  identity: { id?: string; created?: string } = {},
): Promise<{ id: string; created: string; digest: string }> {
  for (const [path, content] of Object.entries(files)) {
    await mkdir(dirname(join(dir, path)), { recursive: true });
    await writeFile(join(dir, path), content);
  }
  const listed = Object.entries(files)
    .map(([path, content]) => ({
      path,
      sha256: sha256Of(content),
      size: Buffer.byteLength(content),
    }))
    .sort((a, b) => Buffer.compare(Buffer.from(a.path), Buffer.from(b.path)));
  const digest = sha256Of(listed.map((f) => `${f.sha256} ${f.size} ${f.path}\n`).join(""));
  const id = identity.id ?? "reports.example.2026-06-04";
  const created = identity.created ?? "2026-06-04T11:55:00Z";
  const manifest = { schema_version: 1, id, created, digest, files: listed };
  await writeFile(join(dir, "manifest.json"), `${JSON.stringify(manifest, null, 2)}\n`);
  return { id, created, digest };
}

/** Temporary directories made by one test file; `cleanup` removes them. */
export class TempDirs {
  readonly #dirs: string[] = [];

  async make(): Promise<string> {
    const dir = await mkdtemp(join(tmpdir(), "distributor-upload-"));
    this.#dirs.push(dir);
    return dir;
  }

  async cleanup(): Promise<void> {
    await Promise.all(this.#dirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
  }
}
