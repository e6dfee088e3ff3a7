#!/usr/bin/env node
// Benchmark: `distributor run` local → S3 against `rclone copy` to the same S3 server.
//
//   pnpm build && node bench/run-s3.mjs [--files 1000] [--size 102400] [--big 0] [--runs 3]
//
// The server comes from DISTRIBUTOR_BENCH_S3_ENDPOINT / _KEY / _SECRET (and an existing bucket in
// DISTRIBUTOR_BENCH_S3_BUCKET); without them a throwaway Ceph RGW is started with the test
// harness of packages/storage-s3 (needs `radosgw ceph-mon ceph-osd`). rclone is configured purely
// by environment (remote `bench`). Each timed run publishes to a fresh prefix, which is emptied
// (untimed) afterwards.
import { execFileSync, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { median, mib, s3BenchEnv, writeSized } from "./common.mjs";

const repo = dirname(dirname(fileURLToPath(import.meta.url)));
const bin = join(repo, "packages/cli/dist/bin.cjs");
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

function time(command, args, options = {}) {
  const start = process.hrtime.bigint();
  const result = spawnSync(command, args, { encoding: "utf8", maxBuffer: 64 << 20, ...options });
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  if (result.status !== 0) {
    throw new Error(`${command} ${args.join(" ")} failed (${result.status}):\n${result.stderr}`);
  }
  const peak = /peak_rss_bytes=(\d+)/.exec(result.stderr ?? "");
  const maxRss = /Maximum resident set size \(kbytes\): (\d+)/.exec(result.stderr ?? "");
  return {
    seconds,
    peakRss: peak ? Number(peak[1]) : maxRss ? Number(maxRss[1]) * 1024 : undefined,
  };
}

/** The test harness is TypeScript: compile it once into the work directory and import it. */
async function startCeph(work) {
  const out = join(work, "harness");
  execFileSync(join(repo, "node_modules/.bin/tsc"), [
    join(repo, "packages/storage-s3/test/ceph.ts"),
    "--outDir",
    out,
    "--module",
    "nodenext",
    "--moduleResolution",
    "nodenext",
    "--target",
    "es2023",
    "--types",
    "node",
    "--typeRoots",
    join(repo, "node_modules/@types"),
    "--skipLibCheck",
  ]);
  await writeFile(join(out, "package.json"), '{"type":"module"}\n');
  const { startCeph } = await import(pathToFileURL(join(out, "ceph.js")).href);
  return startCeph();
}

const work = await mkdtemp(join(tmpdir(), "distributor-bench-s3-"));
let cluster;
try {
  let endpoint = process.env.DISTRIBUTOR_BENCH_S3_ENDPOINT;
  let key = process.env.DISTRIBUTOR_BENCH_S3_KEY;
  let secret = process.env.DISTRIBUTOR_BENCH_S3_SECRET;
  let bucket = process.env.DISTRIBUTOR_BENCH_S3_BUCKET ?? "bench";
  if (endpoint === undefined) {
    cluster = await startCeph(work);
    ({ endpoint, accessKeyId: key, secretAccessKey: secret } = cluster);
    bucket = "bench";
    console.log(`started Ceph RGW at ${endpoint} in ${(cluster.startedInMs / 1000).toFixed(1)} s`);
  }
  const env = { ...s3BenchEnv(key, secret), RCLONE_CONFIG_BENCH_ENDPOINT: endpoint };
  if (cluster !== undefined) time("rclone", ["mkdir", `bench:${bucket}`], { env });

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
  time("node", [bin, "manifest", "create", "--id", "bench.bundle", bundle], { env });
  const configFor = async (prefix) => {
    const config = join(work, `${prefix}.yml`);
    await writeFile(
      config,
      `pipelines:\n  - id: bench\n    source: {backend: local, path: ${join(work, "source")}}\n` +
        `    validation: {max_files: ${files + 10}, max_total_size: 1000GB}\n` +
        `    destinations:\n      - {id: s3, backend: s3, bucket: ${bucket}, prefix: ${prefix}, ` +
        `endpoint: "${endpoint}", force_path_style: true, ` +
        "credentials: {access_key_id_env: BENCH_S3_KEY, secret_access_key_env: BENCH_S3_SECRET}}\n",
    );
    return config;
  };
  const purge = (prefix) => {
    time("rclone", ["purge", `bench:${bucket}/${prefix}`], { env });
    // A memstore OSD holds deleted data until RGW's garbage collection frees it.
    if (cluster !== undefined) {
      const conf = join(cluster.directory, "ceph.conf");
      time("radosgw-admin", ["-c", conf, "gc", "process", "--include-all"], { env });
    }
  };

  const distributor = [];
  const rclone = [];
  for (let run = 0; run < runs; run++) {
    const prefix = `d${run}-${randomBytes(3).toString("hex")}`;
    const config = await configFor(prefix);
    distributor.push(
      time("node", ["--import", join(repo, "bench/peak-rss.mjs"), bin, "run", "--config", config], {
        env,
      }),
    );
    purge(prefix);
    const target = `r${run}-${randomBytes(3).toString("hex")}`;
    rclone.push(
      time("/usr/bin/time", ["-v", "rclone", "copy", bundle, `bench:${bucket}/${target}/bundle`], {
        env,
      }),
    );
    purge(target);
  }
  const total = files * size + big;
  const d = median(distributor.map((r) => r.seconds));
  const r = median(rclone.map((result) => result.seconds));
  console.log(
    `tree: ${files} files x ${size} B${big > 0 ? ` + 1 file of ${big} B` : ""} = ${mib(total)}`,
  );
  console.log(
    `distributor run → s3: median ${d.toFixed(2)} s over ${runs} runs (${distributor.map((x) => x.seconds.toFixed(2)).join(", ")})`,
  );
  console.log(
    `rclone copy → s3:     median ${r.toFixed(2)} s over ${runs} runs (${rclone.map((x) => x.seconds.toFixed(2)).join(", ")})`,
  );
  console.log(`ratio run / rclone:   ${(d / r).toFixed(2)}x`);
  console.log(
    `peak RSS: distributor ${mib(Math.max(...distributor.map((x) => x.peakRss ?? 0)))}, rclone ${mib(Math.max(...rclone.map((x) => x.peakRss ?? 0)))}`,
  );
} finally {
  await cluster?.stop();
  await rm(work, { recursive: true, force: true });
}
