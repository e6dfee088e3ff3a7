#!/usr/bin/env node
// Benchmark across a round trip: `distributor run` local → S3 against `rclone copy`, both through
// one TCP proxy that delays each direction by half the round trip (this kernel has no netem).
//
//   pnpm build && node bench/run-remote.mjs [--rtt 0,20,80] [--workloads few,many,skip]
//       [--runs 3] [--transfers 4]
//
// Workloads: `few` 100 × 100 KiB (the fixed cost of a run), `many` 1 000 × 100 KiB, `tiny`
// 10 000 × 1 KiB, `big` one 1 GiB file, `skip` a re-run of `few` in which everything skips.
// Peers: rclone with its defaults, and rclone with `--transfers` equal to distributor's write
// concurrency. Runs alternate (distributor, rclone, rclone-equal, …) on fresh prefixes. The
// proxy counts requests by method and key class, so requests per published file and the
// requests of a skip-only run are printed beside the times.
//
// The server is a throwaway Ceph RGW started with the test harness of packages/storage-s3
// (needs `radosgw ceph-mon ceph-osd`), or DISTRIBUTOR_BENCH_S3_ENDPOINT / _KEY / _SECRET /
// _BUCKET. The proxy runs in this process, so every command is spawned asynchronously (a
// blocking spawn would stall the proxy's event loop).
import { execFile, execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs, promisify } from "node:util";
import { median, mib, writeSized } from "./common.mjs";

const repo = dirname(dirname(fileURLToPath(import.meta.url)));
const bin = join(repo, "packages/cli/dist/bin.cjs");
const { values } = parseArgs({
  options: {
    rtt: { type: "string", default: "0,20,80" },
    workloads: { type: "string", default: "few,many,skip" },
    runs: { type: "string", default: "3" },
    transfers: { type: "string", default: "4" },
  },
});
const rtts = values.rtt.split(",").map(Number);
const workloads = values.workloads.split(",");
const runs = Number(values.runs);
const transfers = Number(values.transfers);

const SHAPES = {
  few: { files: 100, size: 100 * 1024 },
  many: { files: 1000, size: 100 * 1024 },
  tiny: { files: 10_000, size: 1024 },
  big: { files: 0, size: 0, big: 1 << 30 },
  skip: { files: 100, size: 100 * 1024, skip: true },
};

/** Runs a command to completion without blocking this process's event loop. */
function time(command, args, options = {}) {
  return new Promise((resolve, reject) => {
    const start = process.hrtime.bigint();
    const child = spawn(command, args, { ...options, stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    child.stdout.resume();
    child.stderr.on("data", (chunk) => {
      stderr += chunk;
    });
    child.on("error", reject);
    child.on("close", (code) => {
      const seconds = Number(process.hrtime.bigint() - start) / 1e9;
      if (code !== 0) {
        reject(new Error(`${command} ${args.join(" ")} failed (${code}):\n${stderr}`));
        return;
      }
      const peak = /peak_rss_bytes=(\d+)/.exec(stderr);
      const maxRss = /Maximum resident set size \(kbytes\): (\d+)/.exec(stderr);
      resolve({
        seconds,
        peakRss: peak ? Number(peak[1]) : maxRss ? Number(maxRss[1]) * 1024 : undefined,
      });
    });
  });
}

async function compileHarness(work, file) {
  const out = join(work, "harness");
  execFileSync(join(repo, "node_modules/.bin/tsc"), [
    file,
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
  return out;
}

/** A request's key class, for counting: the state, the lease, an output, or a listing. */
function keyClass(request) {
  const [path, query = ""] = request.path.split("?");
  if (path.endsWith("/.distributor.json")) return "state";
  if (path.endsWith("/.distributor.lease.json")) return "lease";
  if (query.includes("list-type") || query.includes("delete")) return "bucket";
  if (path.split("/").filter(Boolean).length <= 1) return "bucket";
  return "output";
}

function countRequests(requests) {
  const counts = new Map();
  for (const request of requests) {
    const key = `${request.method} ${keyClass(request)}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return [...counts.entries()].sort(([a], [b]) => (a < b ? -1 : 1));
}

const work = await mkdtemp(join(tmpdir(), "distributor-bench-remote-"));
let cluster;
const proxies = [];
try {
  const testing = join(repo, "packages/storage/dist/testing/index.js");
  const { startTcpProxy } = await import(pathToFileURL(testing).href);
  let endpoint = process.env.DISTRIBUTOR_BENCH_S3_ENDPOINT;
  let key = process.env.DISTRIBUTOR_BENCH_S3_KEY;
  let secret = process.env.DISTRIBUTOR_BENCH_S3_SECRET;
  let bucket = process.env.DISTRIBUTOR_BENCH_S3_BUCKET ?? "bench";
  if (endpoint === undefined) {
    const out = await compileHarness(work, join(repo, "packages/storage-s3/test/ceph.ts"));
    const { startCeph } = await import(pathToFileURL(join(out, "ceph.js")).href);
    cluster = await startCeph();
    ({ endpoint, accessKeyId: key, secretAccessKey: secret } = cluster);
    bucket = "bench";
    console.log(`started Ceph RGW at ${endpoint}`);
  }
  const target = new URL(endpoint);
  const baseEnv = {
    ...process.env,
    BENCH_S3_KEY: key,
    BENCH_S3_SECRET: secret,
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true",
    RCLONE_CONFIG_BENCH_TYPE: "s3",
    RCLONE_CONFIG_BENCH_PROVIDER: "Ceph",
    RCLONE_CONFIG_BENCH_ACCESS_KEY_ID: key,
    RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY: secret,
    RCLONE_CONFIG_BENCH_FORCE_PATH_STYLE: "true",
  };
  // rclone honours AWS_CA_BUNDLE even for http:// endpoints; the SDK does not.
  delete baseEnv.AWS_CA_BUNDLE;
  const direct = { ...baseEnv, RCLONE_CONFIG_BENCH_ENDPOINT: endpoint };
  if (cluster !== undefined) await time("rclone", ["mkdir", `bench:${bucket}`], { env: direct });
  const purge = async (prefix) => {
    await time("rclone", ["purge", `bench:${bucket}/${prefix}`], { env: direct }).catch(() => {});
    if (cluster !== undefined) {
      const conf = join(cluster.directory, "ceph.conf");
      await time("radosgw-admin", ["-c", conf, "gc", "process", "--include-all"], { env: direct });
    }
  };

  const table = [];
  for (const name of workloads) {
    const shape = SHAPES[name];
    if (shape === undefined) throw new Error(`unknown workload ${name}`);
    const source = join(work, name, "source");
    const bundle = join(source, "bundle");
    await mkdir(bundle, { recursive: true });
    for (let i = 0; i < shape.files; i++) {
      const path = join(bundle, `dir${String(i % 20).padStart(2, "0")}`, `file${i}.bin`);
      await mkdir(dirname(path), { recursive: true });
      await writeSized(path, shape.size);
    }
    if (shape.big) await writeSized(join(bundle, "large.bin"), shape.big);
    await promisify(execFile)("node", [bin, "manifest", "create", "--id", "bench.bundle", bundle]);
    const published = shape.files + (shape.big ? 1 : 0);

    for (const rtt of rtts) {
      const proxy = await startTcpProxy({
        target: { host: target.hostname, port: Number(target.port) },
        delayMs: rtt / 2,
        http: true,
      });
      proxies.push(proxy);
      const viaProxy = `http://127.0.0.1:${proxy.port}`;
      const env = { ...baseEnv, RCLONE_CONFIG_BENCH_ENDPOINT: viaProxy };
      const configFor = async (prefix) => {
        const config = join(work, `${prefix}.yml`);
        await writeFile(
          config,
          `pipelines:\n  - id: bench\n    source: {backend: local, path: ${source}}\n` +
            `    validation: {max_files: ${published + 10}, max_total_size: 1000GB}\n` +
            `    destinations:\n      - {id: s3, backend: s3, bucket: ${bucket}, prefix: ${prefix}, ` +
            `endpoint: "${viaProxy}", force_path_style: true, ` +
            "credentials: {access_key_id_env: BENCH_S3_KEY, secret_access_key_env: BENCH_S3_SECRET}}\n",
        );
        return config;
      };
      const results = { distributor: [], rclone: [], rcloneEqual: [] };
      let distributorRequests = [];
      for (let run = 0; run < runs; run++) {
        const prefix = `d${run}-${randomBytes(3).toString("hex")}`;
        const config = await configFor(prefix);
        const runArgs = [
          "--import",
          join(repo, "bench/peak-rss.mjs"),
          bin,
          "run",
          "--config",
          config,
        ];
        if (shape.skip) await time("node", [bin, "run", "--config", config], { env });
        proxy.resetCounts();
        results.distributor.push(await time("node", runArgs, { env }));
        distributorRequests = proxy.requests();
        if (process.env.BENCH_TIMELINE) {
          for (const { method, path, at } of proxy.timeline()) {
            console.log(`  ${at.toFixed(0).padStart(6)} ms ${method} ${path.slice(0, 100)}`);
          }
        }
        await purge(prefix);
        for (const [label, extra] of [
          ["rclone", []],
          ["rcloneEqual", [`--transfers=${transfers}`, `--checkers=${transfers}`]],
        ]) {
          const dest = `r${run}-${randomBytes(3).toString("hex")}`;
          const copy = ["-v", "rclone", "copy", ...extra, bundle, `bench:${bucket}/${dest}/bundle`];
          if (shape.skip) await time("/usr/bin/time", copy, { env });
          results[label].push(await time("/usr/bin/time", copy, { env }));
          await purge(dest);
        }
      }
      await proxy.close();
      const d = median(results.distributor.map((r) => r.seconds));
      const r = median(results.rclone.map((x) => x.seconds));
      const e = median(results.rcloneEqual.map((x) => x.seconds));
      const counts = countRequests(distributorRequests);
      const total = distributorRequests.length;
      table.push({ name, rtt, d, r, e, total, published, counts, results });
      console.log(
        `${name} @ ${rtt} ms: distributor ${d.toFixed(2)} s, rclone ${r.toFixed(2)} s (${(d / r).toFixed(2)}x), rclone --transfers=${transfers} ${e.toFixed(2)} s (${(d / e).toFixed(2)}x); ` +
          `${total} requests${shape.skip ? " (skip-only run)" : ` (${(total / Math.max(1, published)).toFixed(2)} per file)`}: ${counts.map(([k, n]) => `${k}=${n}`).join(" ")}; ` +
          `peak RSS ${mib(Math.max(...results.distributor.map((x) => x.peakRss ?? 0)))}`,
      );
    }
  }
  console.log(
    "\n| workload | RTT | distributor | rclone | ratio | rclone equal | ratio | requests |",
  );
  console.log("| --- | --- | --- | --- | --- | --- | --- | --- |");
  for (const row of table) {
    console.log(
      `| ${row.name} | ${row.rtt} ms | ${row.d.toFixed(2)} s | ${row.r.toFixed(2)} s | ${(row.d / row.r).toFixed(2)} | ${row.e.toFixed(2)} s | ${(row.d / row.e).toFixed(2)} | ${row.total} |`,
    );
  }
} finally {
  for (const proxy of proxies) await proxy.close().catch(() => {});
  await cluster?.stop();
  await rm(work, { recursive: true, force: true });
}
