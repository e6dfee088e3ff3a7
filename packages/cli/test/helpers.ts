import { type ChildProcess, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { once } from "node:events";
import {
  lstat,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  readlink,
  rm,
  writeFile,
} from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach } from "vitest";

export const BIN = fileURLToPath(new URL("../dist/bin.cjs", import.meta.url));
export const FIXTURES = fileURLToPath(new URL("./fixtures/", import.meta.url));

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

export const REPORT = "# Report\nSunny.\n";
export const REPORT_SHA256 =
  "sha256:3640fd37140ee4d2e0e93e78834f232ea67a50e7bc6279203690cc7de1975fa6";
/** The bundle digest of docs/design/bundles.md's example: `report.md` alone. */
export const EXAMPLE_BUNDLE_DIGEST =
  "sha256:1ff36301a4a3f0f3a51ab8a55059a012213b6c2ee48bf0c7eb378c46bcb49f78";

/** Writes docs/design/bundles.md's example bundle (one file, literal manifest) into `directory`. */
export async function writeSpecBundle(directory: string, id = "reports.example.2026-06-04") {
  const manifest = {
    schema_version: 1,
    id,
    created: "2026-06-04T11:55:00Z",
    digest: EXAMPLE_BUNDLE_DIGEST,
    files: [{ path: "report.md", sha256: REPORT_SHA256, size: 16 }],
  };
  await writeFiles(directory, {
    "report.md": REPORT,
    "manifest.json": `${JSON.stringify(manifest, null, 2)}\n`,
  });
}

/** Copies a state fixture to `<directory>/.distributor.json`. */
export async function writeStateFixture(directory: string, name: string): Promise<void> {
  await mkdir(directory, { recursive: true });
  await writeFile(
    join(directory, ".distributor.json"),
    await readFile(join(FIXTURES, "state", name)),
  );
}

/**
 * Configuration text with one local pipeline `reports` and its local destination `archive`;
 * `extra` holds further destination keys, each line indented by eight spaces.
 */
export function singlePipelineConfig(source: string, destination: string, extra = ""): string {
  return `pipelines:
  - id: reports
    source: {backend: local, path: ${source}}
    destinations:
      - id: archive
        backend: local
        path: ${destination}
${extra}`;
}

/** Writes `singlePipelineConfig` to `<directory>/distributor.yml` and returns its path. */
export async function writeConfig(directory: string, source: string, destination: string) {
  const path = join(directory, "distributor.yml");
  await writeFile(path, singlePipelineConfig(source, destination));
  return path;
}

/**
 * Every entry below `root` — directories, files with their bytes, symlinks with their targets —
 * with names read as raw bytes (shown as hex escapes where not UTF-8), so that a comparison of two
 * snapshots proves a tree byte- and entry-identical, empty directories and odd names included.
 */
export async function snapshotTree(root: string): Promise<string[]> {
  const lines: string[] = [];
  const visit = async (dir: Buffer, shown: string) => {
    let names: Buffer[];
    try {
      names = (await readdir(dir, { encoding: "buffer" })) as Buffer[];
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return;
      throw error;
    }
    for (const name of names.sort(Buffer.compare)) {
      const path = Buffer.concat([dir, Buffer.from("/"), name]);
      const label = `${shown}${[...name].map((b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : `\\x${b.toString(16).padStart(2, "0")}`)).join("")}`;
      const info = await lstat(path);
      if (info.isSymbolicLink()) lines.push(`l ${label} -> ${await readlink(path)}`);
      else if (info.isDirectory()) {
        lines.push(`d ${label}/`);
        await visit(path, `${label}/`);
      } else {
        const digest = createHash("sha256")
          .update(await readFile(path))
          .digest("hex");
        lines.push(`f ${label} ${digest.slice(0, 16)}`);
      }
    }
  };
  await visit(Buffer.from(root), "");
  return lines;
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

/** A `distributor serve` child process and what it has logged so far. */
export interface Serving {
  child: ChildProcess;
  /** Base URL from the `listening` log line. */
  url: string;
  stderr: () => string;
  exited: Promise<number | null>;
}

/**
 * Starts `distributor serve --config <config> --listen 127.0.0.1:0` and resolves once it logs the
 * address it listens on. The caller stops it (SIGTERM, or SIGKILL in a finally).
 */
export async function startServe(
  config: string,
  options: { cwd: string; env?: NodeJS.ProcessEnv; listen?: string },
): Promise<Serving> {
  const child = spawn(
    process.execPath,
    [BIN, "serve", "--config", config, "--listen", options.listen ?? "127.0.0.1:0"],
    {
      cwd: options.cwd,
      env: { ...process.env, ...options.env },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let stderr = "";
  const exited = once(child, "exit").then(([code]) => code as number | null);
  const url = await new Promise<string>((resolve, reject) => {
    child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
      stderr += chunk;
      const line = stderr.split("\n").find((l) => l.includes('"type":"listening"'));
      if (line !== undefined) resolve(JSON.parse(line).url);
    });
    void exited.then((code) => reject(new Error(`serve exited ${code}: ${stderr}`)));
  });
  return { child, url, stderr: () => stderr, exited };
}
