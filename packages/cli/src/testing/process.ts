import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { afterEach, beforeEach } from "vitest";

// Running the built `distributor` binary as a separate process, as a user does, and reading what
// it left: for the CLI's own suites and the end-to-end suites against real servers.

/** The built CLI (`dist/bin.cjs` of this package, found through its `package.json`). */
export const BIN = join(
  dirname(createRequire(import.meta.url).resolve("@distributor/cli/package.json")),
  "dist",
  "bin.cjs",
);

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `node dist/bin.cjs ...args` as a separate process and collects what it printed. */
export function runCli(
  args: readonly string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<CliResult> {
  return spawnCli(args, options).done;
}

/** `runCli` for a process the test may stop with a signal before it ends. */
export function spawnCli(
  args: readonly string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
): {
  done: Promise<CliResult>;
  kill: (signal: NodeJS.Signals) => void;
  /** What it printed on stderr so far. */
  stderr: () => string;
} {
  const child = spawn(process.execPath, [BIN, ...args], {
    cwd: options.cwd ?? process.cwd(),
    env: { ...process.env, NO_COLOR: "1", ...options.env },
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
  const done = new Promise<CliResult>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
  return { done, kill: (signal) => child.kill(signal), stderr: () => stderr };
}

/**
 * `distributor upload --wait` of `bundle` to the upload server at `server`, as pipeline `reports`
 * with idempotency key `key`, authenticated with `token`, in its own process.
 */
export function spawnUpload(server: string, bundle: string, key: string, token: string) {
  const args = ["upload", "--server", server, "--pipeline", "reports", "--idempotency-key", key];
  return spawnCli([...args, "--wait", bundle], { env: { DISTRIBUTOR_UPLOAD_TOKEN: token } });
}

/** Parses stdout as the single JSON envelope `--format json` prints. */
export function envelopeOf(result: CliResult): {
  command: string;
  ok: boolean;
  result: Record<string, unknown> | null;
  error?: { code: string; message: string };
} {
  return JSON.parse(result.stdout);
}

/** The envelope's `result`, which the test expects to be present. */
export function resultOf(result: CliResult): Record<string, unknown> {
  const envelope = envelopeOf(result);
  if (envelope.result === null) throw new Error(`no result in ${result.stdout}`);
  return envelope.result;
}

/** A fresh temporary directory per test, removed afterwards. */
export function useTempDir(): () => string {
  let directory: string | undefined;
  beforeEach(async () => {
    directory = await mkdtemp(join(tmpdir(), "distributor-cli-"));
  });
  afterEach(async () => {
    // Retried: a process a test stopped may still be closing files below it for a moment.
    if (directory !== undefined) {
      await rm(directory, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
    }
    directory = undefined;
  });
  return () => {
    if (directory === undefined) throw new Error("temporary directory used outside a test");
    return directory;
  };
}

/** Writes `files` below `directory`, 200 at a time (bundles of thousands take seconds). */
export async function writeFiles(directory: string, files: Record<string, string>): Promise<void> {
  const entries = Object.entries(files);
  for (const parent of new Set(entries.map(([path]) => dirname(join(directory, path))))) {
    await mkdir(parent, { recursive: true });
  }
  for (let start = 0; start < entries.length; start += 200) {
    await Promise.all(
      entries
        .slice(start, start + 200)
        .map(([path, content]) => writeFile(join(directory, path), content)),
    );
  }
}

/** `sha256:<hex>` of some bytes, as manifests and state record it. */
export const sha256Of = (bytes: string | Buffer) =>
  `sha256:${createHash("sha256").update(bytes).digest("hex")}`;

/**
 * Replaces `dir` with a bundle: `files` and a manifest listing them with the digests of docs/design/bundles.md,
 * written directly (not through `manifest create`, which refuses some of what tests need).
 */
export async function writeBundle(
  dir: string,
  id: string,
  created: string,
  files: Record<string, string>,
): Promise<void> {
  await rm(dir, { recursive: true, force: true });
  await writeFiles(dir, files);
  const listed = Object.entries(files)
    .map(([path, text]) => ({ path, sha256: sha256Of(text), size: Buffer.byteLength(text) }))
    .sort((a, b) => Buffer.compare(Buffer.from(a.path), Buffer.from(b.path)));
  const digest = sha256Of(listed.map((f) => `${f.sha256} ${f.size} ${f.path}\n`).join(""));
  const manifest = { schema_version: 1, id, created, digest, files: listed };
  await writeFile(join(dir, "manifest.json"), `${JSON.stringify(manifest, null, 2)}\n`);
}

/** Every file below `root` with its digest (the state, lease and temp files included). */
export async function digestsBelow(root: string): Promise<Record<string, string>> {
  const found: Record<string, string> = {};
  const visit = async (dir: string) => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) await visit(path);
      else {
        // A run still under way renames its temp files: one gone since the listing is skipped.
        const bytes = await readFile(path).catch((error: NodeJS.ErrnoException) => {
          if (error.code === "ENOENT") return undefined;
          throw error;
        });
        if (bytes !== undefined) found[relative(root, path)] = sha256Of(bytes);
      }
    }
  };
  await visit(root);
  return found;
}

/** The digest of each of `paths` below `root` that exists now, read 32 at a time. */
export async function digestsOf(
  root: string,
  paths: readonly string[],
): Promise<Record<string, string>> {
  const found: Record<string, string> = {};
  let next = 0;
  const worker = async () => {
    while (next < paths.length) {
      const path = paths[next++] as string;
      const bytes = await readFile(join(root, path)).catch((error: NodeJS.ErrnoException) => {
        if (error.code === "ENOENT") return undefined;
        throw error;
      });
      if (bytes !== undefined) found[path] = sha256Of(bytes);
    }
  };
  await Promise.all(Array.from({ length: 32 }, worker));
  return found;
}
