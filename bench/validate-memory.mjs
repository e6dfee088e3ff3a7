#!/usr/bin/env node
// Shows that validating a bundle does not hold its files in memory: validates one-file bundles of
// growing size (sparse files, so nothing large is written) and prints the peak resident memory of
// each `distributor validate` process. The numbers should stay flat as the file grows.
//
//   pnpm build && node bench/validate-memory.mjs [--sizes 1MiB,256MiB,1GiB,3GiB]
import { spawnSync } from "node:child_process";
import { mkdir, mkdtemp, open, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const repo = dirname(dirname(fileURLToPath(import.meta.url)));
const bin = join(repo, "packages/cli/dist/bin.cjs");
const { values } = parseArgs({
  options: { sizes: { type: "string", default: "1MiB,256MiB,1GiB,3GiB" } },
});
const units = { KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3 };

function parse(size) {
  const match = /^(\d+)(KiB|MiB|GiB)$/.exec(size);
  if (!match) throw new Error(`size ${size} must look like 256MiB`);
  return Number(match[1]) * units[match[2]];
}

function node(args) {
  const result = spawnSync("node", args, { encoding: "utf8" });
  if (result.status !== 0) throw new Error(`node ${args.join(" ")} failed:\n${result.stderr}`);
  return result;
}

const work = await mkdtemp(join(tmpdir(), "distributor-validate-memory-"));
try {
  for (const size of values.sizes.split(",")) {
    const dir = join(work, size);
    await mkdir(dir, { recursive: true });
    const file = await open(join(dir, "data.bin"), "w");
    await file.truncate(parse(size));
    await file.close();
    node([bin, "manifest", "create", "--id", "memory.check", dir]);
    const { stderr } = node(["--import", join(repo, "bench/peak-rss.mjs"), bin, "validate", dir]);
    const peak = Number(/peak_rss_bytes=(\d+)/.exec(stderr)?.[1]);
    console.log(`${size.padStart(8)}: peak RSS ${(peak / 1024 / 1024).toFixed(1)} MiB`);
    await rm(dir, { recursive: true, force: true });
  }
} finally {
  await rm(work, { recursive: true, force: true });
}
