#!/usr/bin/env node
// Benchmark: `distributor run` local → local against `cp -r` of the same tree.
//
//   pnpm build && node bench/run-local.mjs [--files 1000] [--size 102400] [--big 0] [--keep]
//
// --files N     number of small files (default 1000)
// --size BYTES  size of each small file (default 100 KiB)
// --big BYTES   add one large file of this size (e.g. 1073741824 for 1 GiB; default none)
// --runs N      timed repetitions of each command (default 3); the median is reported
// --keep        keep the generated tree (printed) instead of deleting it
import { spawnSync } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { median, mib, writeSized } from "./common.mjs";

const repo = dirname(dirname(fileURLToPath(import.meta.url)));
const bin = join(repo, "packages/cli/dist/bin.cjs");
const { values } = parseArgs({
  options: {
    files: { type: "string", default: "1000" },
    size: { type: "string", default: String(100 * 1024) },
    big: { type: "string", default: "0" },
    runs: { type: "string", default: "3" },
    keep: { type: "boolean", default: false },
  },
});
const files = Number(values.files);
const size = Number(values.size);
const big = Number(values.big);
const runs = Number(values.runs);

function time(command, args, options = {}) {
  const start = process.hrtime.bigint();
  const result = spawnSync(command, args, { encoding: "utf8", ...options });
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  if (result.status !== 0) {
    throw new Error(`${command} ${args.join(" ")} failed (${result.status}):\n${result.stderr}`);
  }
  const peak = /peak_rss_bytes=(\d+)/.exec(result.stderr ?? "");
  return { seconds, peakRss: peak ? Number(peak[1]) : undefined };
}

const work = await mkdtemp(join(tmpdir(), "distributor-bench-"));
try {
  const bundle = join(work, "source", "bundle");
  for (let i = 0; i < files; i++) {
    const path = join(bundle, `dir${String(i % 20).padStart(2, "0")}`, `file${i}.bin`);
    await mkdir(dirname(path), { recursive: true });
    await writeSized(path, size);
  }
  if (big > 0) {
    await mkdir(bundle, { recursive: true });
    await writeSized(join(bundle, "large.bin"), big);
  }
  time("node", [bin, "manifest", "create", "--id", "bench.bundle", bundle]);
  const config = join(work, "bench.yml");
  const dest = join(work, "published");
  await writeFile(
    config,
    `pipelines:\n  - id: bench\n    source: {backend: local, path: ${join(work, "source")}}\n` +
      `    validation: {max_files: ${files + 10}, max_total_size: 1000GB}\n` +
      `    destinations:\n      - id: local\n        backend: local\n        path: ${dest}\n`,
  );

  const distributor = [];
  const copy = [];
  for (let run = 0; run < runs; run++) {
    await rm(dest, { recursive: true, force: true });
    distributor.push(
      time("node", ["--import", join(repo, "bench/peak-rss.mjs"), bin, "run", "--config", config]),
    );
    await rm(join(work, "copy"), { recursive: true, force: true });
    copy.push(time("cp", ["-r", bundle, join(work, "copy")]));
  }
  const total = files * size + big;
  const d = median(distributor.map((r) => r.seconds));
  const c = median(copy.map((r) => r.seconds));
  console.log(
    `tree: ${files} files x ${size} B${big > 0 ? ` + 1 file of ${big} B` : ""} = ${mib(total)}`,
  );
  console.log(`distributor run: median ${d.toFixed(2)} s over ${runs} runs`);
  console.log(`cp -r:           median ${c.toFixed(2)} s over ${runs} runs`);
  console.log(`ratio run / cp:  ${(d / c).toFixed(1)}x`);
  console.log(`peak RSS of run: ${mib(Math.max(...distributor.map((r) => r.peakRss ?? 0)))}`);
} finally {
  if (values.keep) console.log(`kept ${work}`);
  else await rm(work, { recursive: true, force: true });
}
