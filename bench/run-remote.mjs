#!/usr/bin/env node
// Benchmark across a round trip: `distributor run` local → S3 and local → SFTP against
// `rclone copy` to the same server, both through one TCP proxy that delays each direction by half
// the round trip (this kernel has no netem).
//
//   pnpm build && node bench/run-remote.mjs [--backends s3,sftp] [--rtt 0,20,80]
//       [--workloads few,skip,many,tiny,big] [--runs 3] [--transfers N] [--big-size BYTES]
//
// Workloads: `few` 100 × 100 KiB (the fixed cost of a run), `many` 1 000 × 100 KiB, `tiny`
// 10 000 × 1 KiB, `big` one file of `--big-size` bytes (default 1 GiB), `skip` a re-run of `few`
// in which everything skips. Peers: rclone with its defaults, and rclone with `--transfers` and
// `--checkers` equal to distributor's write concurrency for that backend: `--transfers` when
// given (it is then also written into distributor's config), else the backend's own default
// (`docs/config.md`: ssh 8, s3 4). On SFTP distributor runs twice per round: with its default
// (every file flushed on the server) and with `fsync: false`, which is what rclone does.
//
// For each backend and round trip the proxy is started once and every command makes one untimed
// warm-up run (a fresh gateway's first request was seen to take over a second); then the runs
// alternate (distributor, …, rclone, rclone-equal, …) on fresh prefixes. In HTTP mode (S3) the
// proxy counts requests by method and key class, so requests per published file and the requests
// of a skip-only run are printed beside the times; SFTP is one encrypted stream, so there they are
// "n/a". `BENCH_TIMELINE=1` prints each S3 request of distributor's runs with its arrival time.
// Peak RSS: distributor's from the `peak-rss.mjs` preload, rclone's from `/usr/bin/time -v`.
//
// S3 is a throwaway Ceph RGW started with the test harness of packages/storage-s3 (needs
// `radosgw ceph-mon ceph-osd`), or DISTRIBUTOR_BENCH_S3_ENDPOINT / _KEY / _SECRET / _BUCKET. SFTP
// is a throwaway sshd on loopback (packages/storage-ssh's testing entry; needs `sshd`). rclone runs
// with `shell_type none`, so it does not run md5sum remotely for every file. The proxy runs in
// this process, so every command is spawned asynchronously (a blocking spawn would stall the
// proxy's event loop).
import { execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs, promisify } from "node:util";
import { median, mib, s3BenchEnv, writeSized } from "./common.mjs";

const repo = dirname(dirname(fileURLToPath(import.meta.url)));
const bin = join(repo, "packages/cli/dist/bin.cjs");
const execFileAsync = promisify(execFile);

/** distributor's write concurrency when a destination sets no `transfers` (docs/config.md). */
const DEFAULT_TRANSFERS = { s3: 16, sftp: 16 };

function options() {
  const { values } = parseArgs({
    options: {
      backends: { type: "string", default: "s3,sftp" },
      rtt: { type: "string", default: "0,20,80" },
      workloads: { type: "string", default: "few,skip,many,tiny,big" },
      runs: { type: "string", default: "3" },
      transfers: { type: "string" },
      "big-size": { type: "string", default: String(1 << 30) },
    },
  });
  const backends = values.backends.split(",");
  for (const name of backends) {
    if (!(name in BACKENDS)) throw new Error(`unknown backend ${name}: s3 or sftp`);
  }
  const shapes = workloadShapes(Number(values["big-size"]));
  const workloads = values.workloads.split(",");
  for (const name of workloads) {
    if (!(name in shapes)) throw new Error(`unknown workload ${name}: ${Object.keys(shapes)}`);
  }
  return {
    backends,
    rtts: values.rtt.split(",").map(Number),
    workloads: workloads.map((name) => ({ name, ...shapes[name] })),
    runs: Number(values.runs),
    transfers: values.transfers === undefined ? undefined : Number(values.transfers),
  };
}

function workloadShapes(bigSize) {
  return {
    few: { files: 100, size: 100 * 1024 },
    many: { files: 1000, size: 100 * 1024 },
    tiny: { files: 10_000, size: 1024 },
    big: { files: 0, size: 0, big: bigSize },
    skip: { files: 100, size: 100 * 1024, skip: true },
  };
}

/** The untimed run before each (backend, round trip): small, it only wakes the server up. */
const WARM_UP = { name: "warm-up", files: 10, size: 100 * 1024 };

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

/** Writes a workload's tree (`<dir>/source/bundle`) and its manifest; returns where it is. */
async function writeSource(work, shape) {
  const source = join(work, shape.name, "source");
  const bundle = join(source, "bundle");
  await mkdir(bundle, { recursive: true });
  for (let i = 0; i < shape.files; i++) {
    const path = join(bundle, `dir${String(i % 20).padStart(2, "0")}`, `file${i}.bin`);
    await mkdir(dirname(path), { recursive: true });
    await writeSized(path, shape.size);
  }
  if (shape.big) await writeSized(join(bundle, "large.bin"), shape.big);
  await execFileAsync("node", [bin, "manifest", "create", "--id", "bench.bundle", bundle]);
  return { ...shape, source, bundle, published: shape.files + (shape.big ? 1 : 0) };
}

async function compileHarness(work, file) {
  const out = join(work, "harness");
  await execFileAsync(join(repo, "node_modules/.bin/tsc"), [
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

/**
 * The servers. `start` brings one up and answers with: `proxy(delayMs)`, a delay proxy in front of
 * it; `connect(proxy)`, how distributor and rclone reach it through that proxy (the destination's
 * YAML fields, rclone's environment and remote); `purge(prefix)`, which removes what a run wrote;
 * and `stop()`. `variants` are the distributor configurations timed on it.
 */
const BACKENDS = {
  s3: {
    http: true,
    variants: [{ label: "distributor", yaml: "" }],
    async start(work, startTcpProxy) {
      let endpoint = process.env.DISTRIBUTOR_BENCH_S3_ENDPOINT;
      let key = process.env.DISTRIBUTOR_BENCH_S3_KEY;
      let secret = process.env.DISTRIBUTOR_BENCH_S3_SECRET;
      let bucket = process.env.DISTRIBUTOR_BENCH_S3_BUCKET ?? "bench";
      let cluster;
      if (endpoint === undefined) {
        const out = await compileHarness(work, join(repo, "packages/storage-s3/test/ceph.ts"));
        const { startCeph } = await import(pathToFileURL(join(out, "ceph.js")).href);
        cluster = await startCeph();
        ({ endpoint, accessKeyId: key, secretAccessKey: secret } = cluster);
        bucket = "bench";
        console.log(`started Ceph RGW at ${endpoint}`);
      }
      const baseEnv = s3BenchEnv(key, secret);
      const direct = { ...baseEnv, RCLONE_CONFIG_BENCH_ENDPOINT: endpoint };
      if (cluster !== undefined)
        await time("rclone", ["mkdir", `bench:${bucket}`], { env: direct });
      return {
        async proxy(delayMs) {
          const target = new URL(endpoint);
          return startTcpProxy({
            target: { host: target.hostname, port: Number(target.port) },
            delayMs,
            http: true,
          });
        },
        async connect(proxy) {
          const viaProxy = `http://127.0.0.1:${proxy.port}`;
          return {
            env: { ...baseEnv, RCLONE_CONFIG_BENCH_ENDPOINT: viaProxy },
            destination: (prefix) =>
              `id: s3, backend: s3, bucket: ${bucket}, prefix: ${prefix}, ` +
              `endpoint: "${viaProxy}", force_path_style: true, ` +
              "credentials: {access_key_id_env: BENCH_S3_KEY, secret_access_key_env: BENCH_S3_SECRET}",
            rcloneTarget: (prefix) => `bench:${bucket}/${prefix}/bundle`,
          };
        },
        async purge(prefix) {
          await time("rclone", ["purge", `bench:${bucket}/${prefix}`], { env: direct }).catch(
            () => {},
          );
          if (cluster !== undefined) {
            const conf = join(cluster.directory, "ceph.conf");
            await time("radosgw-admin", ["-c", conf, "gc", "process", "--include-all"], {
              env: direct,
            });
          }
        },
        stop: async () => cluster?.stop(),
      };
    },
  },

  sftp: {
    http: false,
    // The default flushes every file on the server (fsync@openssh.com) before moving it into
    // place; rclone does not flush, so `fsync: false` is the like-for-like comparison.
    variants: [
      { label: "distributor", yaml: "" },
      { label: "distributor, fsync: false", yaml: ", fsync: false", note: "fsync: false" },
    ],
    async start(work, startTcpProxy) {
      const testing = join(repo, "packages/storage-ssh/dist/testing/index.js");
      const { startSshd } = await import(pathToFileURL(testing).href);
      const sshd = await startSshd();
      console.log(`started sshd on 127.0.0.1:${sshd.port}`);
      const [, keyType, hostKey] = sshd.knownHostsLine.trim().split(" ");
      return {
        async proxy(delayMs) {
          return startTcpProxy({ target: { host: sshd.host, port: sshd.port }, delayMs });
        },
        async connect(proxy) {
          // Both clients check the host key under the address they dial: the proxy's port.
          const knownHosts = join(work, `known_hosts_${proxy.port}`);
          await writeFile(knownHosts, `[127.0.0.1]:${proxy.port} ${keyType} ${hostKey}\n`);
          return {
            env: {
              ...process.env,
              RCLONE_CONFIG_BENCH_TYPE: "sftp",
              RCLONE_CONFIG_BENCH_HOST: "127.0.0.1",
              RCLONE_CONFIG_BENCH_PORT: String(proxy.port),
              RCLONE_CONFIG_BENCH_USER: sshd.user,
              RCLONE_CONFIG_BENCH_KEY_FILE: sshd.clientKeyFile,
              RCLONE_CONFIG_BENCH_KNOWN_HOSTS_FILE: knownHosts,
              RCLONE_CONFIG_BENCH_SHELL_TYPE: "none",
            },
            destination: (prefix) =>
              `id: remote, backend: ssh, host: 127.0.0.1, port: ${proxy.port}, ` +
              `user: ${sshd.user}, path: ${join(sshd.sftpRoot, prefix)}, ` +
              `private_key_file: ${sshd.clientKeyFile}, known_hosts_file: ${knownHosts}`,
            rcloneTarget: (prefix) => `bench:${join(sshd.sftpRoot, prefix, "bundle")}`,
          };
        },
        // The server's files are on this machine.
        purge: (prefix) => rm(join(sshd.sftpRoot, prefix), { recursive: true, force: true }),
        stop: () => sshd.stop(),
      };
    },
  },
};

/** Writes a config publishing `tree` to one destination: its YAML fields, then `extra` ones. */
async function writeConfig(work, tree, destination, extra) {
  const config = join(work, `${randomBytes(4).toString("hex")}.yml`);
  await writeFile(
    config,
    `pipelines:\n  - id: bench\n    source: {backend: local, path: ${tree.source}}\n` +
      `    validation: {max_files: ${tree.published + 10}, max_total_size: 1000GB}\n` +
      `    destinations:\n      - {${destination}${extra}}\n`,
  );
  return config;
}

const prefixFor = (label) => `${label}-${randomBytes(3).toString("hex")}`;

/**
 * One (backend, round trip, workload): `runs` rounds of every distributor variant and both
 * rclone peers, alternating, each on a fresh prefix that is purged afterwards.
 */
async function measure({
  work,
  backend,
  server,
  link,
  proxy,
  tree,
  runs,
  transfers,
  transfersYaml,
}) {
  const equal = [`--transfers=${transfers}`, `--checkers=${transfers}`];
  const peers = [
    ["rclone", []],
    ["rcloneEqual", equal],
  ];
  const results = { rclone: [], rcloneEqual: [] };
  for (const variant of backend.variants) results[variant.label] = [];
  let requests = [];
  for (let run = 0; run < runs; run++) {
    for (const variant of backend.variants) {
      const prefix = prefixFor(`d${run}`);
      const config = await writeConfig(
        work,
        tree,
        link.destination(prefix),
        `${variant.yaml}${transfersYaml}`,
      );
      if (tree.skip) await time("node", [bin, "run", "--config", config], { env: link.env });
      proxy.resetCounts();
      const args = ["--import", join(repo, "bench/peak-rss.mjs"), bin, "run", "--config", config];
      results[variant.label].push(await time("node", args, { env: link.env }));
      if (variant === backend.variants[0]) requests = proxy.requests();
      if (backend.http && process.env.BENCH_TIMELINE) {
        for (const { method, path, at } of proxy.timeline()) {
          console.log(`  ${at.toFixed(0).padStart(6)} ms ${method} ${path.slice(0, 100)}`);
        }
      }
      await server.purge(prefix);
    }
    for (const [label, flags] of peers) {
      const prefix = prefixFor(`r${run}`);
      const copy = ["-v", "rclone", "copy", ...flags, tree.bundle, link.rcloneTarget(prefix)];
      if (tree.skip) await time("/usr/bin/time", copy, { env: link.env });
      results[label].push(await time("/usr/bin/time", copy, { env: link.env }));
      await server.purge(prefix);
    }
  }
  return { results, requests };
}

/** One untimed run of every command, so the timed ones meet a server that is awake. */
async function warmUp({ work, backend, server, link, tree, transfers, transfersYaml }) {
  for (const variant of backend.variants) {
    const prefix = prefixFor("warm");
    const config = await writeConfig(
      work,
      tree,
      link.destination(prefix),
      `${variant.yaml}${transfersYaml}`,
    );
    await time("node", [bin, "run", "--config", config], { env: link.env });
    await server.purge(prefix);
  }
  for (const flags of [[], [`--transfers=${transfers}`, `--checkers=${transfers}`]]) {
    const prefix = prefixFor("warm");
    await time("rclone", ["copy", ...flags, tree.bundle, link.rcloneTarget(prefix)], {
      env: link.env,
    });
    await server.purge(prefix);
  }
}

const seconds = (results) => median(results.map((result) => result.seconds));
const spread = (results) => {
  const all = results.map((result) => result.seconds);
  return `${Math.min(...all).toFixed(2)}–${Math.max(...all).toFixed(2)}`;
};
const peak = (results) => mib(Math.max(...results.map((result) => result.peakRss ?? 0)));

/** `{total: "412 (4.12 per file)", counts: "GET state=2 …"}`; none where the proxy sees none. */
function describeRequests(backend, tree, requests) {
  if (!backend.http) return undefined;
  const counts = countRequests(requests)
    .map(([k, n]) => `${k}=${n}`)
    .join(" ");
  const per = tree.skip
    ? "skip-only run"
    : `${(requests.length / Math.max(1, tree.published)).toFixed(2)} per file`;
  return { total: `${requests.length} (${per})`, counts };
}

async function benchmarkBackend(name, { work, trees, warmTree, rtts, runs, transfers }) {
  const { startTcpProxy } = await import(
    pathToFileURL(join(repo, "packages/storage/dist/testing/index.js")).href
  );
  const backend = BACKENDS[name];
  const effective = transfers ?? DEFAULT_TRANSFERS[name];
  const transfersYaml = transfers === undefined ? "" : `, transfers: ${transfers}`;
  const rows = [];
  for (const rtt of rtts) {
    // A fresh server per round trip: Ceph RGW's memstore fills up and then hangs after a few
    // GiB written, even with every prefix purged and its garbage collected (seen after the
    // 1 000-file workload at three round trips).
    const server = await backend.start(work, startTcpProxy);
    try {
      const proxy = await server.proxy(rtt / 2);
      try {
        const link = await server.connect(proxy);
        const context = {
          work,
          backend,
          server,
          link,
          proxy,
          runs,
          transfers: effective,
          transfersYaml,
        };
        await warmUp({ ...context, tree: warmTree });
        for (const tree of trees) {
          const { results, requests } = await measure({ ...context, tree });
          const r = seconds(results.rclone);
          const e = seconds(results.rcloneEqual);
          const described = describeRequests(backend, tree, requests);
          for (const variant of backend.variants) {
            const runsOf = results[variant.label];
            const d = seconds(runsOf);
            const row = {
              workload: variant.note ? `${tree.name}, ${variant.note}` : tree.name,
              rtt,
              distributor: `${d.toFixed(2)} s (${spread(runsOf)})`,
              rclone: `${r.toFixed(2)} s`,
              ratio: (d / r).toFixed(2),
              rcloneEqual: `${e.toFixed(2)} s`,
              ratioEqual: (d / e).toFixed(2),
              requests:
                described === undefined || variant !== backend.variants[0]
                  ? "n/a"
                  : described.total,
              distributorRss: peak(runsOf),
              rcloneRss: `${peak(results.rclone)} / ${peak(results.rcloneEqual)}`,
            };
            rows.push(row);
            console.log(
              `${name} ${row.workload} @ ${rtt} ms: distributor ${row.distributor}, ` +
                `rclone ${row.rclone} (${row.ratio}x), rclone --transfers=${effective} ` +
                `${row.rcloneEqual} (${row.ratioEqual}x); requests ${row.requests}` +
                `${row.requests !== "n/a" ? `: ${described.counts}` : ""}; peak RSS distributor ` +
                `${row.distributorRss}, rclone ${row.rcloneRss}`,
            );
          }
        }
      } finally {
        await proxy.close();
      }
    } finally {
      await server.stop();
    }
  }
  return { name, effective, rows };
}

function printTable({ name, effective, rows }) {
  console.log(`\n${name} (rclone equal: --transfers=${effective} --checkers=${effective})\n`);
  console.log(
    "| workload | RTT | distributor median (min–max) | rclone | ratio | rclone equal | ratio | requests | distributor peak RSS | rclone peak RSS (default / equal) |",
  );
  console.log("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
  for (const row of rows) {
    console.log(
      `| ${row.workload} | ${row.rtt} ms | ${row.distributor} | ${row.rclone} | ${row.ratio} | ` +
        `${row.rcloneEqual} | ${row.ratioEqual} | ${row.requests} | ${row.distributorRss} | ` +
        `${row.rcloneRss} |`,
    );
  }
}

const settings = options();
const work = await mkdtemp(join(tmpdir(), "distributor-bench-remote-"));
try {
  const trees = [];
  for (const shape of settings.workloads) trees.push(await writeSource(work, shape));
  const warmTree = await writeSource(work, WARM_UP);
  const tables = [];
  for (const name of settings.backends) {
    tables.push(await benchmarkBackend(name, { work, trees, warmTree, ...settings }));
  }
  for (const table of tables) printTable(table);
} finally {
  await rm(work, { recursive: true, force: true });
}
