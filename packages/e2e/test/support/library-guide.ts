import { spawn } from "node:child_process";
import { mkdir, readFile, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/*
 * Runs the programs of docs/consumers/library.md as a user would: each snippet is copied verbatim
 * into a fresh directory whose node_modules holds only the packages the guide says to install
 * (linked to the built workspace packages), then run with node.
 */

const root = fileURLToPath(new URL("../../../../", import.meta.url));
const GUIDE = join(root, "docs", "consumers", "library.md");

/** The fenced `js` block of the guide whose first line is `// <name>`. */
export async function guideSnippet(name: string): Promise<string> {
  const text = await readFile(GUIDE, "utf8");
  for (const match of text.matchAll(/```js\n([\s\S]*?)```/g)) {
    const code = match[1] ?? "";
    if (code.startsWith(`// ${name}`)) return code;
  }
  throw new Error(`docs/consumers/library.md has no js block starting with "// ${name}"`);
}

/**
 * A directory with `node_modules/@distributor/<name>` for each named package (the built workspace
 * package) and the guide's snippets written as files.
 */
export async function guideProject(
  directory: string,
  packages: readonly string[],
  snippets: readonly string[],
): Promise<void> {
  const scope = join(directory, "node_modules", "@distributor");
  await mkdir(scope, { recursive: true });
  await writeFile(
    join(directory, "package.json"),
    `${JSON.stringify({ name: "guide-check", private: true, type: "module" })}\n`,
  );
  for (const name of packages) {
    await symlink(join(root, "packages", name), join(scope, name), "dir");
  }
  for (const name of snippets) {
    await writeFile(join(directory, name), await guideSnippet(name));
  }
}

export interface ScriptResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `node <script> ...args` in `directory` (asynchronously: the test may serve it). */
export function runScript(
  directory: string,
  args: readonly string[],
  env: Record<string, string> = {},
): Promise<ScriptResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, {
      cwd: directory,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
      stderr += chunk;
    });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

/** Writes a bundle directory with its manifest (digests as docs/design/bundles.md defines them). */
export async function writeBundle(
  directory: string,
  id: string,
  created: string,
  files: Record<string, string>,
): Promise<void> {
  const { createHash } = await import("node:crypto");
  const sha256 = (data: string) => `sha256:${createHash("sha256").update(data).digest("hex")}`;
  const listed = Object.entries(files)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([path, text]) => ({ path, sha256: sha256(text), size: Buffer.byteLength(text) }));
  for (const [path, text] of Object.entries(files)) {
    await mkdir(join(directory, path, ".."), { recursive: true });
    await writeFile(join(directory, path), text);
  }
  const digest = sha256(
    listed.map((file) => `${file.sha256} ${file.size} ${file.path}\n`).join(""),
  );
  await writeFile(
    join(directory, "manifest.json"),
    `${JSON.stringify({ schema_version: 1, id, created, digest, files: listed }, null, 2)}\n`,
  );
}

/**
 * Builds `@distributor/publish` and the packages it links (the adapters among them), so the guide's
 * programs load current `dist/` files; a cache hit when nothing changed.
 */
export async function buildPublish(): Promise<void> {
  const { execFile } = await import("node:child_process");
  const { promisify } = await import("node:util");
  try {
    await promisify(execFile)(
      join(root, "node_modules", ".bin", "turbo"),
      ["run", "build", "--filter=@distributor/publish...", "--output-logs=errors-only"],
      { cwd: root, maxBuffer: 16 * 1024 * 1024 },
    );
  } catch (error) {
    const { stdout = "", stderr = "" } = error as { stdout?: string; stderr?: string };
    throw new Error(
      `building @distributor/publish for the guide's programs failed:\n${stdout}${stderr}`,
    );
  }
}
