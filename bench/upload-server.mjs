#!/usr/bin/env node
// Benchmark: `distributor serve` under upload load, fed by the upload client library.
//
//   pnpm build && node bench/upload-server.mjs [--small 400] [--clients 8] [--big-clients 4]
//     [--big-size 268435456] [--only small,big] [--server-node-options="--cpu-prof --cpu-prof-dir=DIR"]
//     [--store embedded|postgres] [--strace]
//
// `--store postgres` starts a throwaway PostgreSQL (`@distributor/store-postgres/testing`, needs
// initdb/pg_ctl) and runs every workload on two `serve` instances sharing it and one staging
// directory (`server.staging`); client c talks to instance c % 2. Peak RSS is the larger of the two.
//
// Every workload starts its own server: `node --import bench/peak-rss.mjs packages/cli/dist/bin.cjs
// serve --config <generated> --listen 127.0.0.1:0` in a temporary directory, so the peak RSS it
// prints when it exits on SIGTERM belongs to that workload alone.
//
// Configuration: one upload token; one `http_upload` pipeline per client (`bench-0`, `bench-1`, …),
// each with its own local destination (default `fsync: true`) and `path_mapping: {mode: fixed}`.
// Client c uploads only to `bench-c`, always the same bundle id `bench.client-c` with new content
// and a `created` one second later than its previous upload. Runs of one pipeline run in the order
// they were accepted, so every upload is a real publish: the first of a pipeline `publish_new`,
// every later one `replace_older` (distinct ids at a fixed path would be a conflict, a repeated
// `created` a skip). The benchmark checks each run's action and fails loudly otherwise.
// `workers` is the number of pipelines and `queue_size` holds every upload, so nothing waits for a
// place in the queue and no 503 is expected (uploads are sent without retries: a 503 fails the run).
//
// Workloads:
//   small  --small N bundles (3 random files of 1–4 KiB each, manifest by createManifest) uploaded
//          by --clients concurrent clients, each sending its next upload once the previous one is
//          accepted. Acceptance latency is measured around the client's fetch: from the request's
//          start to the 202's headers. Uploads/s = accepted uploads / wall time from the first
//          request to the last 202. Time to `succeeded` is the run's `finished_at` (server log)
//          minus the request's start; then every run is read back with getRun.
//   big    --big-clients concurrent clients each upload one --big-size bundle (one random file),
//          wait for its run to succeed (polling), then the server is stopped and its peak RSS read.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { mib, writeSized } from "./common.mjs";

const repo = dirname(dirname(fileURLToPath(import.meta.url)));
const bin = join(repo, "packages/cli/dist/bin.cjs");
const peakRss = pathToFileURL(join(repo, "bench/peak-rss.mjs")).href;
const { createManifest } = await import(join(repo, "packages/bundle/dist/index.js"));
const { createLocalBackend } = await import(join(repo, "packages/storage/dist/index.js"));
const { createUploadClient } = await import(join(repo, "packages/upload-client/dist/index.js"));

const { values } = parseArgs({
  options: {
    small: { type: "string", default: "400" },
    clients: { type: "string", default: "8" },
    "big-clients": { type: "string", default: "4" },
    "big-size": { type: "string", default: String(256 * 1024 * 1024) },
    only: { type: "string", default: "small,big" },
    "server-node-options": { type: "string", default: "" },
    store: { type: "string", default: "embedded" },
    strace: { type: "boolean", default: false },
  },
});
const smallCount = Number(values.small);
const clients = Number(values.clients);
const bigClients = Number(values["big-clients"]);
const bigSize = Number(values["big-size"]);
const only = new Set(values.only.split(","));
const serverNodeOptions = values["server-node-options"].split(/\s+/).filter(Boolean);
const storeBackend = values.store;
const traced = values.strace;
if (!["embedded", "postgres"].includes(storeBackend)) {
  throw new Error("--store must be embedded or postgres");
}
const DATABASE_ENV = "DISTRIBUTOR_BENCH_DATABASE_URL";
/** The throwaway PostgreSQL of `--store postgres`, and a fresh database per workload. */
let postgres;
let databases = 0;
for (const [name, value] of [
  ["--small", smallCount],
  ["--clients", clients],
  ["--big-clients", bigClients],
  ["--big-size", bigSize],
]) {
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive integer`);
}

const TOKEN = "bench-upload-token-0123456789";
const TOKEN_ENV = "DISTRIBUTOR_BENCH_UPLOAD_TOKEN";
const BASE_CREATED = Date.parse("2026-01-01T00:00:00Z");
const GOALS = { uploadsPerSecond: 200, p99Ms: 200, bigPeakRssMiB: 200 };

/** Nearest-rank percentile of an unsorted list. */
function percentile(list, p) {
  const sorted = [...list].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)];
}
const ms = (value) => `${value.toFixed(1)} ms`;
const verdict = (ok) => (ok ? "met" : "NOT met");

function configText(work, pipelines, { queueSize, maxUpload, maxTotal }) {
  const ids = pipelines.map((_, i) => `bench-${i}`);
  const shared =
    storeBackend === "postgres"
      ? `  store:\n    backend: postgres\n    url_env: ${DATABASE_ENV}\n` +
        `  staging:\n    backend: local\n    path: ${join(work, "shared-staging")}\n`
      : "";
  let text =
    `server:\n  http:\n    retention: 1h\n    queue_size: ${queueSize}\n` +
    `    workers: ${pipelines.length}\n    staging_directory: ${join(work, "staging")}\n` +
    shared +
    `upload_tokens:\n  - id: bench\n    token_env: ${TOKEN_ENV}\n` +
    `    allow_pipelines: [${ids.join(", ")}]\npipelines:\n`;
  for (const id of ids) {
    text +=
      `  - id: ${id}\n    source: {backend: http_upload, max_upload_size: ${maxUpload}}\n` +
      `    validation: {max_total_size: ${maxTotal}}\n    destinations:\n` +
      `      - id: out\n        backend: local\n        path: ${join(work, "published", id)}\n` +
      `        path_mapping: {mode: fixed}\n`;
  }
  return text;
}

/**
 * Starts `distributor serve` with the peak-RSS preload; collects its JSON log lines. `stop()`
 * sends SIGTERM, waits for the exit and returns the peak RSS the preload printed.
 */
async function startServer(work, config, env = {}) {
  const configPath = join(work, "distributor.yml");
  await writeFile(configPath, config);
  const command = [
    process.execPath,
    ...serverNodeOptions,
    "--import",
    peakRss,
    bin,
    "serve",
    "--config",
    configPath,
    "--listen",
    "127.0.0.1:0",
  ];
  // `--strace`: the server runs under `strace -f -c`, counting its flushes of every thread.
  const straceOut = join(work, `strace-${straceCount++}.txt`);
  const traceArgs = ["-f", "-c", "-e", "trace=fsync,fdatasync,sync_file_range", "-o", straceOut];
  const child = spawn(
    traced ? "strace" : command[0],
    traced ? [...traceArgs, ...command] : command.slice(1),
    {
      cwd: work,
      env: { ...process.env, ...env, [TOKEN_ENV]: TOKEN },
      stdio: ["ignore", "ignore", "pipe"],
    },
  );
  const events = [];
  const runWaiters = new Map();
  let peak;
  let cpuMs;
  let pending = "";
  let raw = "";
  const exited = once(child, "exit").then(([code, signal]) => ({ code, signal }));
  const url = await new Promise((resolve, reject) => {
    child.stderr.setEncoding("utf8").on("data", (chunk) => {
      pending += chunk;
      const lines = pending.split("\n");
      pending = lines.pop();
      for (const line of lines) {
        const rss = /^peak_rss_bytes=(\d+)$/.exec(line);
        if (rss) {
          peak = Number(rss[1]);
          continue;
        }
        const cpu = /^cpu_ms=(\d+)$/.exec(line);
        if (cpu) {
          cpuMs = Number(cpu[1]);
          continue;
        }
        let event;
        try {
          event = JSON.parse(line);
        } catch {
          raw += `${line}\n`;
          continue;
        }
        events.push(event);
        if (event.type === "listening") resolve(event.url);
        if (event.type === "run") runWaiters.get(event.run_id)?.(event);
      }
    });
    void exited.then(({ code, signal }) =>
      reject(new Error(`serve exited (${code ?? signal}) before listening:\n${raw}`)),
    );
  });
  return {
    url,
    pid: child.pid,
    events,
    /** Resolves with the `run` log event of `runId` once the server logged it. */
    runEvent(runId) {
      const found = events.find((event) => event.type === "run" && event.run_id === runId);
      if (found) return Promise.resolve(found);
      return new Promise((resolve) => runWaiters.set(runId, resolve));
    },
    /** The server's CPU time (ms) and, with `--strace`, its flushes; set once it stopped. */
    usage: { cpuMs: undefined, flushes: undefined },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        // Under strace the server is strace's child: it gets the SIGTERM, strace writes its count.
        if (traced) await signalTraced(child.pid, "SIGTERM");
        else child.kill("SIGTERM");
      }
      const { code, signal } = await exited;
      if (code !== 0) throw new Error(`serve exited ${code ?? signal} after SIGTERM:\n${raw}`);
      this.usage.cpuMs = cpuMs;
      if (traced) this.usage.flushes = await countFlushes(straceOut);
      return peak;
    },
    kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    },
  };
}

let straceCount = 0;

/** Sends `signal` to the children of the strace process `pid` (the traced server). */
async function signalTraced(pid, signal) {
  const children = await readFile(`/proc/${pid}/task/${pid}/children`, "utf8").catch(() => "");
  for (const child of children.split(/\s+/).filter(Boolean)) process.kill(Number(child), signal);
}

/** The fsync-family calls of a `strace -c` summary. */
async function countFlushes(file) {
  let total = 0;
  for (const line of (await readFile(file, "utf8")).split("\n")) {
    const match =
      /^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(fsync|fdatasync|sync_file_range)$/.exec(
        line,
      );
    if (match) total += Number(match[1]);
  }
  return total;
}

/**
 * The servers of one workload: one with the embedded store, two sharing a fresh database and the
 * staging directory with `--store postgres`. `runEvent` looks in every instance's log.
 */
async function startServers(work, config) {
  if (storeBackend === "embedded") {
    const server = await startServer(work, config);
    return { servers: [server], runEvent: (runId) => server.runEvent(runId) };
  }
  const url = await postgres.createDatabase(`bench_${process.pid}_${databases++}`);
  const servers = [];
  for (const name of ["a", "b"]) {
    const dir = join(work, name);
    await mkdir(dir, { recursive: true });
    servers.push(await startServer(dir, config, { [DATABASE_ENV]: url }));
  }
  return {
    servers,
    runEvent: (runId) => Promise.race(servers.map((server) => server.runEvent(runId))),
  };
}

/** A client whose fetch records when its last POST started and when its answer's headers came. */
function timedClient(url) {
  const timing = { start: 0, startWall: 0, end: 0, posts: 0 };
  const client = createUploadClient({
    server: url,
    token: TOKEN,
    retry: { attempts: 1 },
    fetch: async (input, init) => {
      const post = init?.method === "POST";
      if (post) {
        timing.posts += 1;
        timing.startWall = Date.now();
        timing.start = performance.now();
      }
      const response = await fetch(input, init);
      if (post) timing.end = performance.now();
      return response;
    },
  });
  return { client, timing };
}

async function makeBundle(dir, id, created, files) {
  await mkdir(dir, { recursive: true });
  for (const [path, bytes] of files) {
    await mkdir(dirname(join(dir, path)), { recursive: true });
    await writeSized(join(dir, path), bytes);
  }
  const backend = createLocalBackend({ root: dir });
  try {
    return (await createManifest(backend, "", { id, created: new Date(created) })).manifest;
  } finally {
    await backend.close();
  }
}

/** Checks the finished runs: all succeeded, each a publish of its bundle. */
async function checkRuns(client, runIds) {
  let succeeded = 0;
  const problems = [];
  const actions = {};
  for (const runId of runIds) {
    const record = await client.getRun(runId);
    const list = record.result?.actions ?? [];
    for (const action of list) actions[action.action] = (actions[action.action] ?? 0) + 1;
    const published =
      list.length === 1 && ["publish_new", "replace_older"].includes(list[0].action);
    if (record.status === "succeeded" && published) succeeded += 1;
    else if (problems.length < 5) {
      problems.push(
        `${runId}: ${record.status} ${list.map((a) => a.action).join(",")} ${JSON.stringify(record.error)}`,
      );
    }
  }
  return { succeeded, problems, actions };
}

const summary = [];
let failed = false;

async function smallWorkload(base) {
  const work = join(base, "small");
  await mkdir(work, { recursive: true });
  const pipelines = Array.from({ length: clients }, (_, c) => c);
  // Bundle i goes to client i % clients, in increasing i, so each client's `created` increases.
  const perClient = pipelines.map(() => []);
  for (let i = 0; i < smallCount; i++) {
    const c = i % clients;
    const dir = join(work, "bundles", `b${i}`);
    const size = () => 1024 + Math.floor(Math.random() * 3 * 1024);
    await makeBundle(dir, `bench.client-${c}`, BASE_CREATED + i * 1000, [
      ["index.md", size()],
      ["data/values.bin", size()],
      ["data/more.bin", size()],
    ]);
    perClient[c].push(dir);
  }
  const { servers, runEvent } = await startServers(
    work,
    configText(work, pipelines, {
      queueSize: smallCount + clients,
      maxUpload: "64MiB",
      maxTotal: "1GB",
    }),
  );
  const server = servers[0];
  try {
    console.log(
      `\nsmall: ${smallCount} bundles × 3 files of 1–4 KiB, ${clients} concurrent clients, ` +
        `${clients} pipelines, store ${storeBackend}, server pid ${servers.map((s) => s.pid).join(", ")}`,
    );
    const samples = [];
    const errors = [];
    const wallStart = performance.now();
    const clientCpuStart = process.cpuUsage();
    let lastAccepted = wallStart;
    await Promise.all(
      perClient.map(async (dirs, c) => {
        const { client, timing } = timedClient(servers[c % servers.length].url);
        for (const dir of dirs) {
          const callStart = performance.now();
          try {
            const accepted = await client.upload(dir, { pipeline: `bench-${c}`, retries: 0 });
            const now = performance.now();
            lastAccepted = Math.max(lastAccepted, now);
            samples.push({
              runId: accepted.run_id,
              latency: timing.end - timing.start,
              call: now - callStart,
              startWall: timing.startWall,
            });
          } catch (error) {
            errors.push(error);
          }
        }
      }),
    );
    const wall = (lastAccepted - wallStart) / 1000;
    const clientCpu = process.cpuUsage(clientCpuStart);
    let timer;
    const finishes = await Promise.race([
      Promise.all(samples.map((sample) => runEvent(sample.runId))),
      new Promise((resolve) => {
        timer = setTimeout(resolve, 120_000);
      }),
    ]);
    clearTimeout(timer);
    const allDone = (performance.now() - wallStart) / 1000;
    const { client } = timedClient(server.url);
    const check = await checkRuns(
      client,
      samples.map((sample) => sample.runId),
    );
    let peak = 0;
    for (const instance of servers) peak = Math.max(peak, (await instance.stop()) ?? 0);

    const latencies = samples.map((sample) => sample.latency);
    const rate = samples.length / wall;
    const p50 = percentile(latencies, 50);
    const p99 = percentile(latencies, 99);
    const calls = samples.map((sample) => sample.call);
    const serverDurations = servers
      .flatMap((instance) => instance.events)
      .filter((event) => event.type === "request" && event.method === "POST")
      .map((event) => event.duration_ms);
    console.log(
      `  accepted ${samples.length}/${smallCount} in ${wall.toFixed(2)} s: ${rate.toFixed(1)} uploads/s`,
    );
    console.log(
      `  acceptance latency (request start → 202): p50 ${ms(p50)}  p99 ${ms(p99)}  max ${ms(Math.max(...latencies))}`,
    );
    console.log(
      `  whole client.upload() (local validation + pack + request): p50 ${ms(percentile(calls, 50))}  p99 ${ms(percentile(calls, 99))}`,
    );
    if (serverDurations.length > 0) {
      console.log(
        `  server-logged POST duration_ms: p50 ${percentile(serverDurations, 50)}  p99 ${percentile(serverDurations, 99)}  max ${Math.max(...serverDurations)}`,
      );
    }
    if (Array.isArray(finishes)) {
      const toSucceeded = finishes.map(
        (event, i) => Date.parse(event.finished_at) - samples[i].startWall,
      );
      console.log(
        `  request start → run finished: p50 ${ms(percentile(toSucceeded, 50))}  p99 ${ms(percentile(toSucceeded, 99))}  max ${ms(Math.max(...toSucceeded))}; all runs done after ${allDone.toFixed(2)} s (${(samples.length / allDone).toFixed(1)} publishes/s)`,
      );
    } else {
      console.log("  runs did not all finish within 120 s of the last acceptance");
    }
    console.log(
      `  runs succeeded: ${check.succeeded}/${smallCount}; actions ${JSON.stringify(check.actions)}; server peak RSS ${mib(peak ?? 0)}`,
    );
    const serverCpu = servers.reduce((sum, instance) => sum + (instance.usage.cpuMs ?? 0), 0);
    console.log(
      `  CPU per upload: server ${(serverCpu / smallCount).toFixed(1)} ms (its whole life: accepting and publishing), ` +
        `clients ${((clientCpu.user + clientCpu.system) / 1000 / smallCount).toFixed(1)} ms (manifest, pack, request; this process)`,
    );
    if (traced) {
      const flushes = servers.reduce((sum, instance) => sum + (instance.usage.flushes ?? 0), 0);
      console.log(
        `  flushes (fsync, fdatasync) per accepted-and-published upload: ${(flushes / smallCount).toFixed(1)} (${flushes} in all, server start included)`,
      );
    }
    for (const error of errors.slice(0, 5)) console.log(`  upload error: ${error.message}`);
    for (const problem of check.problems) console.log(`  run problem: ${problem}`);
    const allOk = errors.length === 0 && check.succeeded === smallCount;
    if (!allOk) failed = true;
    summary.push(
      `  uploads/s ≥ ${GOALS.uploadsPerSecond} (${clients} clients): ${rate.toFixed(1)} ${verdict(rate >= GOALS.uploadsPerSecond)}`,
      `  p99 acceptance latency < ${GOALS.p99Ms} ms: ${ms(p99)} ${verdict(p99 < GOALS.p99Ms)} (p50 ${ms(p50)})`,
      `  every small upload published: ${check.succeeded}/${smallCount} ${allOk ? "yes" : "NO — FAILED"}`,
    );
  } finally {
    for (const instance of servers) instance.kill();
    await rm(work, { recursive: true, force: true });
  }
}

async function bigWorkload(base) {
  const work = join(base, "big");
  await mkdir(work, { recursive: true });
  const pipelines = Array.from({ length: bigClients }, (_, c) => c);
  const dirs = [];
  for (const c of pipelines) {
    const dir = join(work, "bundles", `big${c}`);
    await makeBundle(dir, `bench.client-${c}`, BASE_CREATED, [["large.bin", bigSize]]);
    dirs.push(dir);
  }
  // Random data does not compress: the gzip body is a little larger than the file.
  const { servers } = await startServers(
    work,
    configText(work, pipelines, {
      queueSize: bigClients * 2,
      maxUpload: `${Math.ceil((bigSize * 1.01 + (1 << 20)) / 1024)}KiB`,
      maxTotal: `${Math.ceil((bigSize + (1 << 20)) / 1024)}KiB`,
    }),
  );
  const server = servers[0];
  try {
    console.log(
      `\nbig: ${bigClients} concurrent clients each upload one ${mib(bigSize)} file, store ${storeBackend}, server pid ${servers.map((s) => s.pid).join(", ")}`,
    );
    const start = performance.now();
    const accepts = [];
    const records = await Promise.all(
      dirs.map(async (dir, c) => {
        const { client } = timedClient(servers[c % servers.length].url);
        const accepted = await client.upload(dir, { pipeline: `bench-${c}`, retries: 0 });
        accepts.push((performance.now() - start) / 1000);
        const record = await client.waitForRun(accepted.run_id, {
          timeoutMs: 30 * 60_000,
          pollIntervalMs: 200,
          maxPollIntervalMs: 500,
        });
        return { accepted, record };
      }),
    );
    const wall = (performance.now() - start) / 1000;
    const { client } = timedClient(server.url);
    const check = await checkRuns(
      client,
      records.map(({ accepted }) => accepted.run_id),
    );
    let peak = 0;
    for (const instance of servers) peak = Math.max(peak, (await instance.stop()) ?? 0);
    const total = bigSize * bigClients;
    console.log(
      `  all accepted after ${Math.max(...accepts).toFixed(2)} s (${mib(total / Math.max(...accepts))}/s received); ` +
        `all runs succeeded after ${wall.toFixed(2)} s: ${mib(total / wall)}/s end to end`,
    );
    console.log(
      `  runs succeeded: ${check.succeeded}/${bigClients}; actions ${JSON.stringify(check.actions)}; server peak RSS ${mib(peak)}`,
    );
    for (const problem of check.problems) console.log(`  run problem: ${problem}`);
    const allOk = check.succeeded === bigClients;
    if (!allOk) failed = true;
    const used = peak / 1024 / 1024;
    summary.push(
      `  server peak RSS ≤ ${GOALS.bigPeakRssMiB} MiB (${bigClients} × ${mib(bigSize)}): ${used.toFixed(0)} MiB ${verdict(peak > 0 && used <= GOALS.bigPeakRssMiB)}`,
      `  every big upload published: ${check.succeeded}/${bigClients} ${allOk ? "yes" : "NO — FAILED"}`,
    );
  } finally {
    for (const instance of servers) instance.kill();
    await rm(work, { recursive: true, force: true });
  }
}

const base = await mkdtemp(join(process.env.BENCH_DIR ?? tmpdir(), "distributor-upload-bench-"));
console.log(`distributor upload-server: work in ${base}`);
console.log(`node ${process.version}, ${new Date().toISOString()}`);
if (storeBackend === "postgres") {
  const { startPostgres } = await import(
    join(repo, "packages/store-postgres/dist/testing/index.js")
  );
  postgres = await startPostgres();
}
try {
  if (only.has("small")) await smallWorkload(base);
  if (only.has("big")) await bigWorkload(base);
} finally {
  await postgres?.stop();
  await rm(base, { recursive: true, force: true });
}
console.log("\nsummary");
for (const line of summary) console.log(line);
if (failed) {
  console.log("FAILED: not every upload was published");
  process.exitCode = 1;
}
