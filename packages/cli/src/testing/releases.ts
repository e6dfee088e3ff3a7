import { spawn } from "node:child_process";
import { readdir, readFile, writeFile } from "node:fs/promises";
import { join, relative } from "node:path";
import { READER_SOURCE } from "./release-reader.js";

// What the release-layout suites (local and SSH) share: the sites they publish, and how they
// read a release and compare it with one.

/**
 * `count` pages whose text names `version` (every `changeEvery`-th one changes between versions),
 * an index page, and a file only A has or one only the others have.
 */
export function site(version: string, count: number, changeEvery = 2): Record<string, string> {
  const files: Record<string, string> = {};
  for (let i = 0; i < count; i++) {
    const changes = i % changeEvery === 0;
    files[`pages/${String(i).padStart(5, "0")}.html`] =
      `<p>${changes ? version : "same"} ${i}</p>\n`;
  }
  files["index.html"] = `<h1>${version}</h1>\n`;
  if (version === "A") files["old.txt"] = "only in A\n";
  else files["new.txt"] = `only in ${version}\n`;
  return files;
}

/** Every file below `dir`, by path relative to it, with its text. */
export async function filesBelow(dir: string): Promise<Record<string, string>> {
  const files: Record<string, string> = {};
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    files[relative(dir, path)] = await readFile(path, "utf8");
  }
  return files;
}

/** The same paths with the same texts. */
export const same = (left: Record<string, string>, right: Record<string, string>) =>
  Object.keys(left).length === Object.keys(right).length &&
  Object.entries(left).every(([path, text]) => right[path] === text);

/** What the reader saw, once stopped. */
export interface ReaderReport {
  polls: number;
  reads: number;
  seen: string[];
  violations: string[];
}

/**
 * Starts the reader on `root`, checking against `publications` (name → files, written to
 * `expectedFile`); `stop()` lets it poll a moment longer, stops it and resolves with its report.
 */
export async function startReader(
  root: string,
  expectedFile: string,
  publications: Record<string, Record<string, string>>,
): Promise<{ stop: () => Promise<ReaderReport> }> {
  await writeFile(expectedFile, JSON.stringify(publications));
  const reader = spawn(
    process.execPath,
    ["--input-type=module", "-e", READER_SOURCE, root, expectedFile],
    {
      stdio: ["pipe", "pipe", "inherit"],
    },
  );
  let output = "";
  reader.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    output += chunk;
  });
  const finished = new Promise((resolve) => reader.on("close", resolve));
  return {
    stop: async () => {
      await new Promise((resolve) => setTimeout(resolve, 300));
      reader.stdin.end("stop\n");
      await finished;
      return JSON.parse(output) as ReaderReport;
    },
  };
}

/** `--config … --pipeline site --destination www`: the owner the release suites publish as. */
export const ownerFlags = (config: string): string[] => [
  "--config",
  config,
  "--pipeline",
  "site",
  "--destination",
  "www",
];

/** The release ids below `root` (a bundle path under `layout: releases`), oldest first. */
export async function releaseIds(root: string): Promise<string[]> {
  return (await readdir(join(root, "releases"))).filter((name) => !name.endsWith(".json")).sort();
}

/** A bundle path's pieces, as the release-trust suites publish them: A, then B. */
export const TRUST_FILES_A = {
  "index.html": "<h1>A</h1>\n",
  "assets/f1.txt": "file 1\n",
  "assets/f2.txt": "file 2\n",
};
export const TRUST_FILES_B = { ...TRUST_FILES_A, "index.html": "<h1>B</h1>\n" };
