#!/usr/bin/env node
// Benchmark: `distributor run` local → SSH against `rclone copy` to an sftp remote, both to the
// same throwaway sshd on loopback (needs sshd, rclone, and `pnpm build` first).
//
//   pnpm build && node bench/run-ssh.mjs [--files 1000] [--size 102400] [--big 1073741824] [--runs 3]
//
// --files N     number of small files (default 1000; 0 for none)
// --size BYTES  size of each small file (default 100 KiB)
// --big BYTES   add one large file of this size (default none)
// --runs N      timed repetitions of each command (default 3); the median is reported
//
// rclone runs with `shell_type none`, so it does not run md5sum remotely for every file.
// distributor runs twice per round: with its default (every file flushed on the server) and with
// `fsync: false`, which gives what rclone gives.
import { spawnSync } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { median, mib, writeSized } from "./common.mjs";

const repo = dirname(dirname(fileURLToPath(import.meta.url)));
const bin = join(repo, "packages/cli/dist/bin.cjs");
const { startSshd } = await import(join(repo, "packages/storage-ssh/dist/testing/index.js"));
const { values } = parseArgs({
  options: {
    files: { type: "string", default: "1000" },
    size: { type: "string", default: String(100 * 1024) },
    big: { type: "string", default: "0" },
    runs: { type: "string", default: "3" },
  },
});
const files = Number(values.files);
const size = Number(values.size);
const big = Number(values.big);
const runs = Number(values.runs);

/** Runs a command under `/usr/bin/time -f %M` when available, for the peak RSS of any process. */
function time(command, args, options = {}) {
  const timed = ["-f", "peak_rss_kib=%M", command, ...args];
  const start = process.hrtime.bigint();
  const result = spawnSync("/usr/bin/time", timed, { encoding: "utf8", ...options });
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  if (result.status !== 0) {
    throw new Error(`${command} ${args.join(" ")} failed (${result.status}):\n${result.stderr}`);
  }
  const peak = /peak_rss_kib=(\d+)/.exec(result.stderr ?? "");
  return { seconds, peakRss: peak ? Number(peak[1]) * 1024 : undefined };
}

const work = await mkdtemp(join(tmpdir(), "distributor-bench-ssh-"));
const sshd = await startSshd();
try {
  const bundle = join(work, "source", "bundle");
  await mkdir(bundle, { recursive: true });
  for (let i = 0; i < files; i++) {
    const path = join(bundle, `dir${String(i % 20).padStart(2, "0")}`, `file${i}.bin`);
    await mkdir(dirname(path), { recursive: true });
    await writeSized(path, size);
  }
  if (big > 0) await writeSized(join(bundle, "large.bin"), big);
  time("node", [bin, "manifest", "create", "--id", "bench.bundle", bundle]);
  const knownHosts = join(work, "known_hosts");
  await writeFile(knownHosts, sshd.knownHostsLine);
  const dest = join(sshd.sftpRoot, "published");
  // The default flushes every file on the server (fsync@openssh.com) before moving it into place;
  // rclone does not flush, so `fsync: false` is the like-for-like comparison.
  const configFor = async (name, fsync) => {
    const path = join(work, name);
    await writeFile(
      path,
      `pipelines:\n  - id: bench\n    source: {backend: local, path: ${join(work, "source")}}\n` +
        `    validation: {max_files: ${files + 10}, max_total_size: 1000GB}\n` +
        `    destinations:\n      - id: remote\n        backend: ssh\n        host: 127.0.0.1\n` +
        `        port: ${sshd.port}\n        user: ${sshd.user}\n        path: ${dest}\n` +
        `        private_key_file: ${sshd.clientKeyFile}\n        known_hosts_file: ${knownHosts}\n` +
        (fsync ? "" : "        fsync: false\n"),
    );
    return path;
  };
  const config = await configFor("bench.yml", true);
  const configNoFsync = await configFor("bench-nofsync.yml", false);
  const rcloneEnv = {
    ...process.env,
    RCLONE_CONFIG_BENCH_TYPE: "sftp",
    RCLONE_CONFIG_BENCH_HOST: "127.0.0.1",
    RCLONE_CONFIG_BENCH_PORT: String(sshd.port),
    RCLONE_CONFIG_BENCH_USER: sshd.user,
    RCLONE_CONFIG_BENCH_KEY_FILE: sshd.clientKeyFile,
    RCLONE_CONFIG_BENCH_KNOWN_HOSTS_FILE: knownHosts,
    RCLONE_CONFIG_BENCH_SHELL_TYPE: "none",
  };
  const rcloneDest = join(sshd.sftpRoot, "rclone");

  const distributor = [];
  const distributorNoFsync = [];
  const rclone = [];
  for (let run = 0; run < runs; run++) {
    await rm(dest, { recursive: true, force: true });
    distributor.push(time("node", [bin, "run", "--config", config]));
    await rm(dest, { recursive: true, force: true });
    distributorNoFsync.push(time("node", [bin, "run", "--config", configNoFsync]));
    await rm(rcloneDest, { recursive: true, force: true });
    rclone.push(time("rclone", ["copy", bundle, `bench:${rcloneDest}`], { env: rcloneEnv }));
  }
  const total = files * size + big;
  const seconds = (results) => median(results.map((result) => result.seconds));
  const peak = (results) => mib(Math.max(...results.map((result) => result.peakRss ?? 0)));
  const r = seconds(rclone);
  console.log(
    `tree: ${files} files x ${size} B${big > 0 ? ` + 1 file of ${big} B` : ""} = ${mib(total)}`,
  );
  for (const [label, results] of [
    ["distributor run (local -> ssh)", distributor],
    ["distributor run, fsync: false", distributorNoFsync],
  ]) {
    const d = seconds(results);
    console.log(
      `${`${label}:`.padEnd(32)}median ${d.toFixed(2)} s over ${runs} runs, ` +
        `${(d / r).toFixed(2)}x rclone, peak RSS ${peak(results)}`,
    );
  }
  console.log(
    `${"rclone copy (sftp):".padEnd(32)}median ${r.toFixed(2)} s over ${runs} runs, peak RSS ${peak(rclone)}`,
  );
} finally {
  await sshd.stop();
  await rm(work, { recursive: true, force: true });
}
