import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdir, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { BIN, type Serving, startServe, useTempDir, writeBundle } from "./helpers.js";
import { createdOf, pack } from "./upload-load.js";

// A `serve` belongs to one service (`server.name`, or its configuration file), with the real
// `distributor serve`: the default staging area and store are the service's own directory under
// $XDG_STATE_HOME, a store recorded for another service is refused, and a queued upload runs only
// under the pipeline configuration it was accepted under.

const TOKEN = "identity-test-token-value";
const tempDir = useTempDir();

/** One local pipeline `reports` fed by uploads; `server` holds further `server:` lines. */
function configText(site: string, server = ""): string {
  return `server:
  http:
    listen: 127.0.0.1:0
${server}upload_tokens:
  - {id: reporter, token_env: REPORTER_TOKEN, allow_pipelines: [reports]}
pipelines:
  - id: reports
    source: {backend: http_upload}
    destinations:
      - {id: site, backend: local, path: ${site}}
`;
}

/** Writes `<dir>/<name>/distributor.yml` and returns its path. */
async function writeConfig(dir: string, name: string, text: string): Promise<string> {
  await mkdir(join(dir, name), { recursive: true });
  const path = join(dir, name, "distributor.yml");
  await writeFile(path, text);
  return path;
}

/** What every spawned `serve` gets: the token, and a state directory inside the test's own. */
const envOf = (dir: string) => ({ REPORTER_TOKEN: TOKEN, XDG_STATE_HOME: join(dir, "state") });

const serviceRoot = (dir: string) => join(dir, "state", "distributor", "serve");

/** A bundle `reports.identity` of one file, packed; `index` sets its `created` and contents. */
async function archive(dir: string, index: number): Promise<Buffer> {
  const bundle = join(dir, "bundles", String(index));
  await writeBundle(bundle, "reports.identity", createdOf(index), {
    "report.md": `# Report ${index}\n`,
  });
  return pack(bundle);
}

async function upload(url: string, body: Buffer, key: string) {
  const response = await fetch(`${url}/pipelines/reports/uploads`, {
    method: "POST",
    headers: {
      Authorization: `Bearer ${TOKEN}`,
      "Content-Type": "application/gzip",
      "Idempotency-Key": key,
    },
    body: new Uint8Array(body),
    signal: AbortSignal.timeout(20_000),
  });
  const json = (await response.json()) as { run_id?: string };
  return {
    status: response.status,
    replayed: response.headers.get("Idempotency-Replayed"),
    runId: json.run_id ?? "",
  };
}

interface RunRecord {
  run_id: string;
  status: string;
  error: { code: string; message: string } | null;
}

async function runRecord(url: string, runId: string, wait = "20s"): Promise<RunRecord> {
  const response = await fetch(`${url}/runs/${runId}?wait=${wait}`, {
    headers: { Authorization: `Bearer ${TOKEN}` },
  });
  expect(response.status).toBe(200);
  return (await response.json()) as RunRecord;
}

async function finalRecord(url: string, runId: string): Promise<RunRecord> {
  let record = await runRecord(url, runId);
  for (let i = 0; i < 5 && record.status !== "succeeded" && record.status !== "failed"; i++) {
    record = await runRecord(url, runId);
  }
  return record;
}

async function stop(serving: Serving): Promise<void> {
  if (serving.child.exitCode === null && serving.child.signalCode === null) {
    serving.child.kill("SIGTERM");
  }
  await serving.exited;
}

/** The entries of a directory, or `[]` when it does not exist. */
async function entries(path: string): Promise<string[]> {
  try {
    return (await readdir(path)).sort();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw error;
  }
}

/** `<service directory>` → the service its store records, for every directory under the root. */
async function recordedServices(dir: string): Promise<Map<string, string>> {
  const services = new Map<string, string>();
  for (const name of await entries(serviceRoot(dir))) {
    const text = await readFile(join(serviceRoot(dir), name, "store", "service.json"), "utf8");
    services.set(join(serviceRoot(dir), name), (JSON.parse(text) as { service: string }).service);
  }
  return services;
}

/**
 * Runs `serve` expecting it to refuse to start: its exit code and stderr. If it starts listening
 * instead, it is killed and that is reported as `started`.
 */
function serveRefused(
  config: string,
  options: { cwd: string; env: NodeJS.ProcessEnv },
): Promise<{ code: number | null; stderr: string; started: boolean }> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [BIN, "serve", "--config", config, "--listen", "127.0.0.1:0"],
      {
        cwd: options.cwd,
        env: { ...process.env, NO_COLOR: "1", ...options.env },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let stderr = "";
    let started = false;
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
      stderr += chunk;
      if (!started && stderr.includes('"type":"listening"')) {
        started = true;
        child.kill("SIGKILL");
      }
    });
    child.stdout.resume();
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stderr, started }));
  });
}

describe("two serve processes of different configurations", () => {
  it.each([
    ["one after the other (the first stopped)", false],
    ["side by side (the first still running)", true],
  ])(
    "%s keep their own stores: one idempotency key is accepted by each, each publishes to its own destination",
    async (_, overlap) => {
      const dir = tempDir();
      const env = envOf(dir);
      const configs = [
        await writeConfig(dir, "one", configText(join(dir, "site-one"))),
        await writeConfig(dir, "two", configText(join(dir, "site-two"))),
      ];
      const body = await archive(dir, 0);
      const running: Serving[] = [];
      try {
        for (const [index, config] of configs.entries()) {
          const serving = await startServe(config, { cwd: dir, env });
          running.push(serving);
          const accepted = await upload(serving.url, body, "k1");
          expect(accepted, `service ${index}`).toMatchObject({ status: 202, replayed: null });
          expect(await finalRecord(serving.url, accepted.runId), `service ${index}`).toMatchObject({
            status: "succeeded",
            error: null,
          });
          if (!overlap) await stop(serving);
        }
      } finally {
        for (const serving of running) await stop(serving);
      }
      for (const site of ["site-one", "site-two"]) {
        expect(await readFile(join(dir, site, "report.md"), "utf8"), site).toBe("# Report 0\n");
      }
      // Each configuration's store is its own directory under $XDG_STATE_HOME, recording its file.
      const services = await recordedServices(dir);
      expect([...services.values()].sort()).toEqual(configs.map((c) => `config:${c}`).sort());
      expect(services.size).toBe(2);
      for (const [directory] of services) {
        expect(await entries(directory)).toEqual(["staging", "store"]);
      }
    },
    60_000,
  );

  it("refuses to open another service's store, naming the service it belongs to", async () => {
    const dir = tempDir();
    const env = envOf(dir);
    const first = await writeConfig(dir, "one", configText(join(dir, "site-one")));
    const serving = await startServe(first, { cwd: dir, env });
    const accepted = await upload(serving.url, await archive(dir, 0), "k1");
    expect(accepted.status).toBe(202);
    expect(await finalRecord(serving.url, accepted.runId)).toMatchObject({ status: "succeeded" });
    await stop(serving);

    const [[firstDirectory, recorded] = []] = [...(await recordedServices(dir))];
    expect(recorded).toBe(`config:${first}`);
    const store = join(firstDirectory as string, "store");
    const serviceFile = await readFile(join(store, "service.json"), "utf8");
    const third = await writeConfig(
      dir,
      "three",
      configText(join(dir, "site-three"), `  store:\n    path: ${store}\n`),
    );
    const refused = await serveRefused(third, { cwd: dir, env });
    expect(refused.started, refused.stderr).toBe(false);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      `upload store ${store} belongs to service ${JSON.stringify(`config:${first}`)}, not ${JSON.stringify(`config:${third}`)}`,
    );
    // Refused, never altered: the first service opens its store again and finds its run.
    expect(await readFile(join(store, "service.json"), "utf8")).toBe(serviceFile);
    const again = await startServe(first, { cwd: dir, env });
    try {
      expect(await runRecord(again.url, accepted.runId, "0s")).toMatchObject({
        status: "succeeded",
      });
    } finally {
      await stop(again);
    }
    expect(await entries(join(dir, "site-three"))).toEqual([]);
  }, 60_000);

  it("opens one store one after the other when both configurations name the same server.name", async () => {
    const dir = tempDir();
    const env = envOf(dir);
    const server = `  name: reports-service\n  store:\n    path: ${join(dir, "shared-store")}\n`;
    const first = await writeConfig(dir, "one", configText(join(dir, "site"), server));
    const second = await writeConfig(
      dir,
      "two",
      configText(join(dir, "site"), server).replace("http:\n", "http:\n    workers: 1\n"),
    );
    const body = await archive(dir, 0);

    const a = await startServe(first, { cwd: dir, env });
    let accepted: Awaited<ReturnType<typeof upload>>;
    try {
      accepted = await upload(a.url, body, "k1");
      expect(accepted).toMatchObject({ status: 202, replayed: null });
      expect(await finalRecord(a.url, accepted.runId)).toMatchObject({ status: "succeeded" });
    } finally {
      await stop(a);
    }

    const b = await startServe(second, { cwd: dir, env });
    try {
      // The same service: its runs and its idempotency keys.
      expect(await runRecord(b.url, accepted.runId, "0s")).toMatchObject({ status: "succeeded" });
      expect(await upload(b.url, body, "k1")).toEqual({
        status: 200,
        replayed: "true",
        runId: accepted.runId,
      });
    } finally {
      await stop(b);
    }
    expect(b.stderr()).not.toContain("store_in_use");
    const recorded = JSON.parse(await readFile(join(dir, "shared-store", "service.json"), "utf8"));
    expect(recorded.service).toBe("reports-service");
    // The default staging area is each configuration file's own, named after server.name.
    expect(await entries(serviceRoot(dir))).toEqual([
      expect.stringMatching(/^reports-service-[0-9a-f]{12}$/),
      expect.stringMatching(/^reports-service-[0-9a-f]{12}$/),
    ]);
    expect(await readFile(join(dir, "site", "report.md"), "utf8")).toBe("# Report 0\n");
  }, 60_000);
});

describe("two configuration files in two directories that name one server.name", () => {
  it("keep a default store each: the same bundle and key are accepted by each and published to each destination", async () => {
    const dir = tempDir();
    const env = envOf(dir);
    const server = "  name: publisher\n";
    const configs = [
      await writeConfig(dir, "one", configText(join(dir, "site-one"), server)),
      await writeConfig(dir, "two", configText(join(dir, "site-two"), server)),
    ];
    const body = await archive(dir, 0);
    const runIds: string[] = [];
    for (const [index, config] of configs.entries()) {
      const serving = await startServe(config, { cwd: dir, env });
      try {
        const accepted = await upload(serving.url, body, "K");
        expect(accepted, `configuration ${index}`).toMatchObject({ status: 202, replayed: null });
        expect(await finalRecord(serving.url, accepted.runId)).toMatchObject({
          status: "succeeded",
          error: null,
        });
        runIds.push(accepted.runId);
      } finally {
        await stop(serving);
      }
    }
    expect(runIds[0]).not.toBe(runIds[1]);
    for (const site of ["site-one", "site-two"]) {
      expect(await readFile(join(dir, site, "report.md"), "utf8"), site).toBe("# Report 0\n");
    }
    // Two service directories, both recording the service's name.
    const services = await recordedServices(dir);
    expect([...services.values()]).toEqual(["publisher", "publisher"]);
    expect([...services.keys()].map((directory) => directory.split("/").at(-1))).toEqual([
      expect.stringMatching(/^publisher-[0-9a-f]{12}$/),
      expect.stringMatching(/^publisher-[0-9a-f]{12}$/),
    ]);
  }, 60_000);

  it("sharing one store by server.store.path: a replay of the other's key is refused with idempotency_key_other_config, and nothing is published", async () => {
    const dir = tempDir();
    const env = envOf(dir);
    const server = `  name: publisher\n  store:\n    path: ${join(dir, "shared-store")}\n`;
    const first = await writeConfig(dir, "one", configText(join(dir, "site-one"), server));
    const second = await writeConfig(dir, "two", configText(join(dir, "site-two"), server));
    const body = await archive(dir, 0);

    const a = await startServe(first, { cwd: dir, env });
    let accepted: Awaited<ReturnType<typeof upload>>;
    try {
      accepted = await upload(a.url, body, "K");
      expect(accepted).toMatchObject({ status: 202, replayed: null });
      expect(await finalRecord(a.url, accepted.runId)).toMatchObject({ status: "succeeded" });
    } finally {
      await stop(a);
    }

    const b = await startServe(second, { cwd: dir, env });
    try {
      const response = await fetch(`${b.url}/pipelines/reports/uploads`, {
        method: "POST",
        headers: {
          Authorization: `Bearer ${TOKEN}`,
          "Content-Type": "application/gzip",
          "Idempotency-Key": "K",
        },
        body: new Uint8Array(body),
        signal: AbortSignal.timeout(20_000),
      });
      expect(response.status).toBe(409);
      expect(response.headers.get("Idempotency-Replayed")).toBeNull();
      const refusal = (await response.json()) as { error: { code: string; message: string } };
      expect(refusal.error.code).toBe("idempotency_key_other_config");
      expect(refusal.error.message).toContain(
        `Idempotency-Key was already used for run ${accepted.runId}, accepted under another configuration of pipeline reports`,
      );
      // A new key is a new upload, published where this configuration says.
      const again = await upload(b.url, body, "K2");
      expect(again).toMatchObject({ status: 202, replayed: null });
      expect(await finalRecord(b.url, again.runId)).toMatchObject({ status: "succeeded" });
    } finally {
      await stop(b);
    }
    expect(await readFile(join(dir, "site-two", "report.md"), "utf8")).toBe("# Report 0\n");
  }, 60_000);

  it("sharing one store by server.store.path side by side: the second is refused with store_in_use naming both files", async () => {
    const dir = tempDir();
    const env = envOf(dir);
    const store = join(dir, "shared-store");
    const server = `  name: publisher\n  store:\n    path: ${store}\n`;
    const first = await writeConfig(dir, "one", configText(join(dir, "site-one"), server));
    const second = await writeConfig(dir, "two", configText(join(dir, "site-two"), server));
    const a = await startServe(first, { cwd: dir, env });
    try {
      const refused = await serveRefused(second, { cwd: dir, env });
      expect(refused.started, refused.stderr).toBe(false);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain(
        `upload store ${store} is in use by process ${a.child.pid} on this host, serving ${first} (this process serves ${second})`,
      );
    } finally {
      await stop(a);
    }
  }, 60_000);
});

describe("a named service whose store earlier versions kept in the directory keyed by its name", () => {
  it("is warned of at start, with settings that drain it, and those settings run what was queued there", async () => {
    const dir = tempDir();
    const env = envOf(dir);
    const site = join(dir, "site");
    const earlier = join(
      serviceRoot(dir),
      `publisher-${createHash("sha256").update("publisher").digest("hex").slice(0, 12)}`,
    );
    const draining = await writeConfig(
      dir,
      "drain",
      configText(
        site,
        `  name: publisher\n  store:\n    path: ${join(earlier, "store")}\n`,
      ).replace("http:\n", `http:\n    staging_directory: ${join(earlier, "staging")}\n`),
    );
    // What an earlier version left: an upload queued in that store, its run held up by a live
    // lease at the destination when the process was killed.
    const lease = join(site, ".distributor.lease.json");
    await mkdir(site, { recursive: true });
    await writeFile(
      lease,
      JSON.stringify({
        format: "distributor-lease/1",
        owner: { pipeline_id: "elsewhere", destination_id: "site" },
        run_id: "held-by-test",
        host: hostname(),
        pid: process.pid,
        acquired_at: new Date().toISOString(),
        expires_at: new Date(Date.now() + 600_000).toISOString(),
        journal: [],
        directories: [],
      }),
    );
    const killed = await startServe(draining, { cwd: dir, env });
    let runId: string;
    try {
      const accepted = await upload(killed.url, await archive(dir, 0), "K");
      expect(accepted.status).toBe(202);
      runId = accepted.runId;
    } finally {
      killed.child.kill("SIGKILL");
      await killed.exited;
    }
    await rm(lease);

    const config = await writeConfig(dir, "one", configText(site, "  name: publisher\n"));
    const serving = await startServe(config, { cwd: dir, env });
    await stop(serving);
    const own = [...(await recordedServices(dir)).keys()].find((path) => path !== earlier);
    const warnings = serving
      .stderr()
      .split("\n")
      .filter((line) => line.includes('"type":"warning"'))
      .map((line) => (JSON.parse(line) as { message: string }).message);
    expect(warnings).toContain(
      `server.name "publisher": the default staging area and store are now this configuration file's own, in ${own}; ${earlier} holds the store that earlier versions shared between every configuration naming this service, and uploads still queued there run only where a serve opens it: to drain it, serve once with server.store.path: ${join(earlier, "store")} and server.http.staging_directory: ${join(earlier, "staging")}, then remove ${earlier}`,
    );
    expect(await entries(site)).toEqual([]);

    // The settings it names run the queued upload.
    const drained = await startServe(draining, { cwd: dir, env });
    try {
      expect(await finalRecord(drained.url, runId)).toMatchObject({ status: "succeeded" });
    } finally {
      await stop(drained);
    }
    expect(drained.stderr()).not.toContain("the default staging area and store are now");
    expect(await readFile(join(site, "report.md"), "utf8")).toBe("# Report 0\n");
  }, 60_000);
});

describe("a serve killed with queued runs, restarted with its pipeline configured otherwise", () => {
  it("fails those runs config_changed and publishes nothing at the new destination", async () => {
    const dir = tempDir();
    const env = envOf(dir);
    const oldSite = join(dir, "site-old");
    const newSite = join(dir, "site-new");
    const workers = "    workers: 1\n";
    const config = await writeConfig(
      dir,
      "service",
      configText(oldSite).replace("http:\n", `http:\n${workers}`),
    );

    // Another run's live lease holds the old destination: the first run waits inside it, and the
    // pipeline's other runs wait in the queue behind it.
    const lease = join(oldSite, ".distributor.lease.json");
    await mkdir(oldSite, { recursive: true });
    await writeFile(
      lease,
      JSON.stringify({
        format: "distributor-lease/1",
        owner: { pipeline_id: "elsewhere", destination_id: "site" },
        run_id: "held-by-test",
        host: hostname(),
        pid: process.pid,
        acquired_at: new Date().toISOString(),
        expires_at: new Date(Date.now() + 600_000).toISOString(),
        journal: [],
        directories: [],
      }),
    );

    const killed = await startServe(config, { cwd: dir, env });
    const runIds: string[] = [];
    try {
      for (let index = 0; index < 3; index++) {
        const accepted = await upload(killed.url, await archive(dir, index), `k${index}`);
        expect(accepted.status).toBe(202);
        runIds.push(accepted.runId);
      }
      const [first, ...rest] = runIds as [string, ...string[]];
      for (
        let i = 0;
        i < 400 && (await runRecord(killed.url, first, "0s")).status !== "running";
        i++
      ) {
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      expect((await runRecord(killed.url, first, "0s")).status).toBe("running");
      for (const runId of rest) {
        expect((await runRecord(killed.url, runId, "0s")).status).toBe("queued");
      }
    } finally {
      killed.child.kill("SIGKILL");
      await killed.exited;
    }
    await rm(lease);
    expect(await entries(oldSite)).toEqual([]);

    // The same configuration file, its pipeline now writing elsewhere.
    await writeFile(config, configText(newSite).replace("http:\n", `http:\n${workers}`));
    const restarted = await startServe(config, { cwd: dir, env });
    try {
      for (const runId of runIds) {
        const record = await finalRecord(restarted.url, runId);
        expect(record, runId).toMatchObject({
          status: "failed",
          error: { code: "config_changed" },
        });
        expect(record.error?.message).toContain(
          "pipeline reports is configured otherwise than when this upload was accepted",
        );
      }
      expect(await entries(newSite)).toEqual([]);
      expect(await entries(oldSite)).toEqual([]);

      // Uploaded again, under the configuration in force, the bundle publishes there.
      const again = await upload(restarted.url, await archive(dir, 3), "k3");
      expect(again.status).toBe(202);
      expect(await finalRecord(restarted.url, again.runId)).toMatchObject({
        status: "succeeded",
      });
      expect(await readFile(join(newSite, "report.md"), "utf8")).toBe("# Report 3\n");
    } finally {
      await stop(restarted);
    }
    expect(restarted.stderr()).not.toContain(TOKEN);
  }, 60_000);
});
