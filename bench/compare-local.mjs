#!/usr/bin/env node
// Benchmark: local → local publishing against the tools operators compare distributor with.
//
//   pnpm build && node bench/compare-local.mjs [--runs 5] [--only small,big,many,rerun,validate,help]
//
// For each workload it builds the source tree once, then runs every command alternately
// (A B C … A B C …), each on a fresh destination after a `sync`, so no command inherits another's
// writeback. Every command is wrapped in GNU time for its peak RSS. It prints, per command, the
// median and min–max wall time, the peak RSS, and the ratio of the median to each peer's median,
// then the target for the workload and whether it is met.
//
// Beside them runs `node-floor.mjs`: a plain Node program making the system calls distributor's
// design requires (two hashes, temp file + link + unlink, a state file), without distributor's
// code, so each ratio to a peer can be read against what Node itself reaches.
//
// Workloads:
//   small     1 000 × 100 KiB: distributor (fsync), distributor (fsync: false), rclone copy,
//             rsync -a, rsync -a --fsync, cp -r
//   big       one 1 GiB file: the same commands
//   many      20 000 × 4 KiB: distributor (fsync: false), rclone copy, rsync -a, cp -r
//   rerun     1 000 × 100 KiB already published: distributor re-run vs rclone copy re-run
//   validate  `distributor validate` of the 1 GiB bundle vs a Node streaming SHA-256 of its file
//   help      `distributor --help` (reported alone)
//
// Peers are Debian's `rclone` and `rsync` (`apt-get install -y rclone rsync`); a missing peer is
// reported and its ratios left out. Set BENCH_DIR to build the trees on another filesystem.
import { spawnSync } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { availableParallelism, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { median, mib, writeSized } from "./common.mjs";

const repo = dirname(dirname(fileURLToPath(import.meta.url)));
const bin = join(repo, "packages/cli/dist/bin.cjs");
const floor = join(repo, "bench/node-floor.mjs");
// The floor's flushes get the thread pool the CLI's entry (bin.cjs) gives a run.
const floorEnv = {
  UV_THREADPOOL_SIZE:
    process.env.UV_THREADPOOL_SIZE ?? String(Math.min(16, Math.max(4, 2 * availableParallelism()))),
};
const { values } = parseArgs({
  options: {
    runs: { type: "string", default: "5" },
    only: { type: "string", default: "small,big,many,rerun,validate,help" },
  },
});
const runs = Number(values.runs);
const only = new Set(values.only.split(","));

function has(command) {
  return spawnSync("sh", ["-c", `command -v ${command}`], { encoding: "utf8" }).status === 0;
}
const peers = { rclone: has("rclone"), rsync: has("rsync") };
for (const [name, present] of Object.entries(peers)) {
  if (!present) console.log(`note: ${name} is not installed; its runs are skipped`);
}

/** Runs a command under GNU time; returns wall seconds and peak RSS in bytes. */
function measure(argv, env = {}) {
  const start = process.hrtime.bigint();
  const result = spawnSync("/usr/bin/time", ["-f", "bench_max_rss_kb=%M", ...argv], {
    encoding: "utf8",
    env: { ...process.env, RCLONE_CONFIG: "/dev/null", ...env },
    maxBuffer: 64 << 20,
  });
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  if (result.status !== 0) {
    throw new Error(`${argv.join(" ")} failed (${result.status}):\n${result.stderr}`);
  }
  const rss = /bench_max_rss_kb=(\d+)/.exec(result.stderr);
  return { seconds, rss: rss ? Number(rss[1]) * 1024 : 0 };
}

function sync() {
  spawnSync("sync");
}

/**
 * Times every command `runs` times, alternating. A command is
 * `{name, argv, prepare?}`; `prepare` runs untimed before each timed run.
 */
async function compare(commands) {
  const samples = new Map(commands.map((command) => [command.name, []]));
  for (let run = 0; run < runs; run++) {
    for (const command of commands) {
      await command.prepare?.();
      sync();
      samples.get(command.name).push(measure(command.argv, command.env));
    }
  }
  const rows = commands.map((command) => {
    const list = samples.get(command.name);
    const times = list.map((sample) => sample.seconds);
    return {
      name: command.name,
      median: median(times),
      min: Math.min(...times),
      max: Math.max(...times),
      rss: Math.max(...list.map((sample) => sample.rss)),
    };
  });
  const width = Math.max(...rows.map((row) => row.name.length));
  for (const row of rows) {
    console.log(
      `  ${row.name.padEnd(width)}  median ${row.median.toFixed(3)} s  (${row.min.toFixed(3)}–${row.max.toFixed(3)})  peak RSS ${mib(row.rss)}`,
    );
  }
  return Object.fromEntries(rows.map((row) => [row.name, row]));
}

/** Prints `a / b` for every pair worth comparing, and the target check. */
function ratios(results, subjects, against) {
  for (const subject of subjects) {
    const parts = against
      .filter((peer) => results[peer] !== undefined && results[subject] !== undefined)
      .map((peer) => `${(results[subject].median / results[peer].median).toFixed(2)}× ${peer}`);
    if (parts.length > 0) console.log(`  ${subject}: ${parts.join(", ")}`);
  }
}

function target(label, subject, peer, limit, results) {
  const a = results[subject];
  const b = results[peer];
  if (a === undefined || b === undefined) {
    console.log(`  target ${label}: not measured`);
    return;
  }
  const ratio = a.median / b.median;
  console.log(
    `  target ${label}: ${ratio.toFixed(2)} (limit ${limit}) ${ratio <= limit ? "met" : "NOT met"}`,
  );
}

/**
 * The report of a publish workload run by `commandSet`: both distributor modes against every
 * peer, each mode's target against the peer giving the same guarantee, and peak RSS.
 */
function publishTargets(results, fsyncLimit, plainLimit) {
  const modes = ["distributor (fsync)", "distributor (fsync: false)"];
  const floors = ["node floor (fsync)", "node floor (fsync: false)"];
  ratios(results, [...modes, ...floors], ["rclone copy", "rsync -a", "rsync -a --fsync", "cp -r"]);
  ratios(results, [modes[0]], [floors[0]]);
  ratios(results, [modes[1]], [floors[1]]);
  target(
    `fsync ≤ ${fsyncLimit.toFixed(1)} × rsync -a --fsync`,
    modes[0],
    "rsync -a --fsync",
    fsyncLimit,
    results,
  );
  target(
    `fsync: false ≤ ${plainLimit.toFixed(1)} × rclone copy`,
    modes[1],
    "rclone copy",
    plainLimit,
    results,
  );
  rssTarget(results, modes, 100);
}

function rssTarget(results, names, limitMiB) {
  for (const name of names) {
    const row = results[name];
    if (row === undefined) continue;
    const used = row.rss / 1024 / 1024;
    console.log(
      `  target peak RSS of ${name} ≤ ${limitMiB} MiB: ${used.toFixed(0)} MiB ${used <= limitMiB ? "met" : "NOT met"}`,
    );
  }
}

async function buildTree(root, files, size) {
  for (let i = 0; i < files; i++) {
    const path = join(root, `dir${String(i % 20).padStart(2, "0")}`, `file${i}.bin`);
    await mkdir(dirname(path), { recursive: true });
    await writeSized(path, size);
  }
}

async function configFor(work, name, source, files, fsync) {
  const path = join(work, `${name}.yml`);
  await writeFile(
    path,
    `pipelines:\n  - id: bench\n    source: {backend: local, path: ${source}}\n` +
      `    validation: {max_files: ${files + 10}, max_total_size: 1000GB}\n` +
      `    destinations:\n      - id: out\n        backend: local\n        path: ${join(work, name)}\n` +
      `        fsync: ${fsync}\n`,
  );
  return path;
}

/** The standard command set of one workload, each writing to its own fresh directory. */
async function commandSet(work, source, bundle, files, { withFsyncPeers = true } = {}) {
  const fresh = (name) => () => rm(join(work, name), { recursive: true, force: true });
  const fsyncConfig = await configFor(work, "dist-fsync", source, files, true);
  const plainConfig = await configFor(work, "dist-nofsync", source, files, false);
  const commands = [];
  if (withFsyncPeers) {
    commands.push({
      name: "distributor (fsync)",
      argv: ["node", bin, "run", "--config", fsyncConfig],
      prepare: fresh("dist-fsync"),
    });
  }
  commands.push({
    name: "distributor (fsync: false)",
    argv: ["node", bin, "run", "--config", plainConfig],
    prepare: fresh("dist-nofsync"),
  });
  if (withFsyncPeers) {
    commands.push({
      name: "node floor (fsync)",
      argv: ["node", floor, "copy", bundle, join(work, "floor-fsync"), "--fsync"],
      env: floorEnv,
      prepare: fresh("floor-fsync"),
    });
  }
  commands.push({
    name: "node floor (fsync: false)",
    argv: ["node", floor, "copy", bundle, join(work, "floor-nofsync")],
    env: floorEnv,
    prepare: fresh("floor-nofsync"),
  });
  if (peers.rclone) {
    commands.push({
      name: "rclone copy",
      argv: ["rclone", "copy", bundle, join(work, "rclone")],
      prepare: fresh("rclone"),
    });
  }
  if (peers.rsync) {
    commands.push({
      name: "rsync -a",
      argv: ["rsync", "-a", `${bundle}/`, join(work, "rsync")],
      prepare: fresh("rsync"),
    });
    if (withFsyncPeers) {
      commands.push({
        name: "rsync -a --fsync",
        argv: ["rsync", "-a", "--fsync", `${bundle}/`, join(work, "rsync-fsync")],
        prepare: fresh("rsync-fsync"),
      });
    }
  }
  commands.push({
    name: "cp -r",
    argv: ["cp", "-r", bundle, join(work, "cp")],
    prepare: fresh("cp"),
  });
  return commands;
}

function manifest(bundle) {
  measure(["node", bin, "manifest", "create", "--force", "--id", "bench.bundle", bundle]);
}

const base = await mkdtemp(join(process.env.BENCH_DIR ?? tmpdir(), "distributor-compare-"));
console.log(`distributor compare-local: ${runs} runs per command, alternating; work in ${base}`);
console.log(`node ${process.version}, ${new Date().toISOString()}`);
try {
  if (only.has("small") || only.has("rerun")) {
    const work = join(base, "small");
    const source = join(work, "source");
    const bundle = join(source, "bundle");
    await buildTree(bundle, 1000, 100 * 1024);
    manifest(bundle);
    if (only.has("small")) {
      console.log("\n1 000 × 100 KiB, local → local");
      const results = await compare(await commandSet(work, source, bundle, 1000));
      publishTargets(results, 1.0, 1.3);
    }
    if (only.has("rerun")) {
      console.log("\nre-run, nothing changed (1 000 × 100 KiB already published)");
      const config = await configFor(work, "rerun", source, 1000, true);
      measure(["node", bin, "run", "--config", config]);
      const commands = [
        { name: "distributor re-run", argv: ["node", bin, "run", "--config", config] },
        { name: "node floor re-run", argv: ["node", floor, "rerun", config] },
      ];
      if (peers.rclone) {
        measure(["rclone", "copy", bundle, join(work, "rclone-rerun")]);
        commands.push({
          name: "rclone copy re-run",
          argv: ["rclone", "copy", bundle, join(work, "rclone-rerun")],
        });
      }
      const results = await compare(commands);
      ratios(results, ["distributor re-run", "node floor re-run"], ["rclone copy re-run"]);
      ratios(results, ["distributor re-run"], ["node floor re-run"]);
      target("re-run ≤ 3 × rclone re-run", "distributor re-run", "rclone copy re-run", 3, results);
    }
    await rm(work, { recursive: true, force: true });
  }

  if (only.has("big") || only.has("validate")) {
    const work = join(base, "big");
    const source = join(work, "source");
    const bundle = join(source, "bundle");
    await mkdir(bundle, { recursive: true });
    await writeSized(join(bundle, "large.bin"), 1024 ** 3);
    manifest(bundle);
    if (only.has("big")) {
      console.log("\none 1 GiB file, local → local");
      const results = await compare(await commandSet(work, source, bundle, 1));
      publishTargets(results, 1.1, 1.0);
    }
    if (only.has("validate")) {
      console.log("\nvalidate the 1 GiB bundle");
      const hash =
        "const h=require('node:crypto').createHash('sha256');" +
        `require('node:fs').createReadStream(${JSON.stringify(join(bundle, "large.bin"))},{highWaterMark:1<<20})` +
        ".on('data',(c)=>h.update(c)).on('end',()=>console.log(h.digest('hex')))";
      const results = await compare([
        { name: "distributor validate", argv: ["node", bin, "validate", bundle] },
        { name: "node streaming sha256", argv: ["node", "-e", hash] },
      ]);
      target(
        "validate ≤ 1.2 × node sha256",
        "distributor validate",
        "node streaming sha256",
        1.2,
        results,
      );
      rssTarget(results, ["distributor validate"], 100);
    }
    await rm(work, { recursive: true, force: true });
  }

  if (only.has("many")) {
    const work = join(base, "many");
    const source = join(work, "source");
    const bundle = join(source, "bundle");
    await buildTree(bundle, 20_000, 4096);
    manifest(bundle);
    console.log("\n20 000 × 4 KiB, local → local");
    const results = await compare(
      await commandSet(work, source, bundle, 20_000, { withFsyncPeers: false }),
    );
    ratios(
      results,
      ["distributor (fsync: false)", "node floor (fsync: false)"],
      ["rclone copy", "rsync -a", "cp -r"],
    );
    ratios(results, ["distributor (fsync: false)"], ["node floor (fsync: false)"]);
    target(
      "fsync: false ≤ 1.3 × rclone copy",
      "distributor (fsync: false)",
      "rclone copy",
      1.3,
      results,
    );
    rssTarget(results, ["distributor (fsync: false)"], 120);
    await rm(work, { recursive: true, force: true });
  }

  if (only.has("help")) {
    console.log("\ndistributor --help");
    const results = await compare([{ name: "distributor --help", argv: ["node", bin, "--help"] }]);
    const help = results["distributor --help"];
    console.log(
      `  target median ≤ 120 ms: ${(help.median * 1000).toFixed(0)} ms ${help.median <= 0.12 ? "met" : "NOT met"}`,
    );
  }
} finally {
  await rm(base, { recursive: true, force: true });
}
