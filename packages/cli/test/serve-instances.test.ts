import { randomUUID } from "node:crypto";
import { mkdir, readdir, readFile, rm, utimes, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import { join, relative } from "node:path";
import {
  liveClaims,
  stallWhileTaking,
  startPostgres,
  type TestPostgres,
} from "@distributor/store-postgres/testing";
import { afterAll, describe, expect, it } from "vitest";
import {
  runCli,
  type Serving,
  sha256Of,
  spawnCli,
  startServe,
  useTempDir,
  writeBundle,
} from "./helpers.js";
import {
  createdOf,
  pack,
  postUpload,
  type RunEvent,
  runEvents,
  type Upload,
} from "./upload-load.js";

// docs/integrations/http-upload.md, several instances with real `distributor serve` processes: two instances share one
// PostgreSQL database and one staging directory.

const TOKEN = "instances-test-token-value";
const tempDir = useTempDir();

function postgresRequired(): boolean {
  const ci = process.env.CI;
  return ci !== undefined && ci !== "" && ci !== "0" && ci !== "false";
}

let postgres: TestPostgres | null = null;
try {
  postgres = await startPostgres();
} catch (error) {
  if (postgresRequired()) throw error;
  console.warn(`serve instances tests skipped: ${(error as Error).message}`);
}
afterAll(async () => {
  await postgres?.stop();
});

// The queue holds every upload of these tests: acceptance outruns two workers' publishing, and a
// 503 for a full queue is not what they are about.
function configText(dir: string, claimTimeout = "2s"): string {
  return `server:
  http:
    listen: 127.0.0.1:0
    queue_size: 128
    workers: 2
  store:
    backend: postgres
    url_env: DISTRIBUTOR_DATABASE_URL
    claim_timeout: ${claimTimeout}
  staging:
    backend: local
    path: ${join(dir, "staging")}
upload_tokens:
  - {id: reporter, token_env: REPORTER_TOKEN, allow_pipelines: [alpha, beta]}
pipelines:
  - id: alpha
    source: {backend: http_upload}
    destinations:
      - {id: site, backend: local, path: ${join(dir, "alpha-site")}}
  - id: beta
    source: {backend: http_upload}
    destinations:
      - {id: site, backend: local, path: ${join(dir, "beta-site")}}
`;
}

const post = (url: string, upload: Upload) => postUpload(url, TOKEN, upload);

async function runStatus(url: string, runId: string, wait = "20s") {
  const response = await fetch(`${url}/runs/${runId}?wait=${wait}`, {
    headers: { Authorization: `Bearer ${TOKEN}` },
  });
  expect(response.status).toBe(200);
  return (await response.json()) as { status: string; error: unknown };
}

async function finalStatus(url: string, runId: string) {
  let record = await runStatus(url, runId);
  for (let i = 0; i < 10 && record.status !== "succeeded" && record.status !== "failed"; i++) {
    record = await runStatus(url, runId);
  }
  return record;
}

async function makeUploads(dir: string, count: number, pipelines: string[], files = 20) {
  const uploads: Upload[] = [];
  for (let index = 0; index < count; index++) {
    const bundle = join(dir, "bundles", String(index));
    const content: Record<string, string> = {};
    for (let f = 0; f < files; f++)
      content[`docs/${f}.md`] = `# ${index}.${f}\n${"x".repeat(4000)}\n`;
    const pipeline = pipelines[index % pipelines.length] as string;
    await writeBundle(bundle, `${pipeline}.reports`, createdOf(index), content);
    uploads.push({ index, pipeline, key: `upload-${index}`, archive: await pack(bundle) });
  }
  return uploads;
}

/** Each destination's state records exactly the bytes on disk, and holds the newest upload. */
async function expectDestinationsAgree(dir: string, pipelines: string[], uploads: Upload[]) {
  for (const pipeline of pipelines) {
    const site = join(dir, `${pipeline}-site`);
    const state = JSON.parse(await readFile(join(site, ".distributor.json"), "utf8")) as {
      source: { manifest: { created: string } };
      outputs: { path: string; sha256: string; size: number }[];
    };
    const onDisk = (await readdir(site, { recursive: true, withFileTypes: true }))
      .filter((entry) => entry.isFile())
      .map((entry) => relative(site, join(entry.parentPath, entry.name)))
      .filter((path) => path !== ".distributor.json")
      .filter((path) => !/^\.distributor\.[0-9a-f]+\.tmp$/.test(path))
      .sort();
    expect(onDisk).toEqual(state.outputs.map((output) => output.path).sort());
    for (const output of state.outputs) {
      expect(sha256Of(await readFile(join(site, output.path))), output.path).toBe(output.sha256);
    }
    const newest = uploads.filter((u) => u.pipeline === pipeline).at(-1)?.index ?? -1;
    expect(state.source.manifest.created).toBe(createdOf(newest));
  }
}

/** Waits until the shared staging directory is empty: removal follows the final record. */
async function expectStagingEmpties(dir: string) {
  for (let i = 0; i < 100 && (await readdir(join(dir, "staging"))).length > 0; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  expect(await readdir(join(dir, "staging"))).toEqual([]);
}

describe.skipIf(postgres === null)("two distributor serve instances on one PostgreSQL", () => {
  async function setup() {
    const dir = tempDir();
    const config = join(dir, "distributor.yml");
    await writeFile(config, configText(dir));
    const database = await (postgres as TestPostgres).createDatabase(
      `instances_${randomUUID().replaceAll("-", "").slice(0, 12)}`,
    );
    const env = { REPORTER_TOKEN: TOKEN, DISTRIBUTOR_DATABASE_URL: database };
    const start = () => startServe(config, { cwd: dir, env });
    return { dir, start, database };
  }

  it("share uploads: any instance answers for any run, each run executes once, a pipeline's runs never overlap", async () => {
    const { dir, start } = await setup();
    const uploads = await makeUploads(dir, 30, ["alpha", "beta"], 5);
    // Which instance takes a queued run is a race that one instance can win every time, so each
    // is made to run some alone: the first batch goes to A before B starts, the last to B while A
    // is stopped (gracefully); A then starts again, and the batches between are spread over both.
    const a = await start();
    const instances: Serving[] = [a];
    const send = async (batch: Upload[], urlOf: (upload: Upload) => string) => {
      const answers = await Promise.all(batch.map((upload) => post(urlOf(upload), upload)));
      for (const [j, answer] of answers.entries()) {
        expect(answer.status).toBe(202);
        (batch[j] as Upload).runId = answer.runId;
      }
    };
    const finished = async (url: string, batch: Upload[]) => {
      for (const upload of batch) {
        expect(await finalStatus(url, upload.runId ?? ""), `upload ${upload.index}`).toEqual(
          expect.objectContaining({ status: "succeeded", error: null }),
        );
      }
    };
    try {
      const first = uploads.slice(0, 3);
      await send(first, () => a.url);
      await finished(a.url, first);
      const b = await start();
      instances.push(b);
      for (let i = 3; i < uploads.length - 3; i += 3) {
        await send(uploads.slice(i, i + 3), (upload) => (upload.index % 2 === 0 ? a.url : b.url));
      }
      await finished(b.url, uploads.slice(3, uploads.length - 3));
      a.child.kill("SIGTERM");
      await a.exited;
      const last = uploads.slice(uploads.length - 3);
      await send(last, () => b.url);
      await finished(b.url, last);
      const again = await start();
      instances.push(again);
      for (const upload of uploads) {
        // Asked of an instance that did not accept it (A's successor counts as another).
        const other = upload.index % 2 === 0 ? b.url : again.url;
        expect(await finalStatus(other, upload.runId ?? ""), `upload ${upload.index}`).toEqual(
          expect.objectContaining({ status: "succeeded", error: null }),
        );
        // A retry on the other instance replays the original run.
        expect(await post(other, upload)).toEqual({ status: 200, runId: upload.runId });
      }
      await expectStagingEmpties(dir);
    } finally {
      for (const serving of instances) serving.child.kill("SIGTERM");
      await Promise.all(instances.map((serving) => serving.exited));
    }
    const [, b] = instances as [Serving, Serving, Serving];
    const events = instances.flatMap((serving) => runEvents(serving.stderr()));
    // Each run executed exactly once, and both instances executed some.
    expect(events.map((event) => event.run_id).sort()).toEqual(
      uploads.map((upload) => upload.runId).sort(),
    );
    expect(events.every((event) => event.status === "succeeded")).toBe(true);
    expect(runEvents(a.stderr()).length).toBeGreaterThan(0);
    expect(runEvents(b.stderr()).length).toBeGreaterThan(0);
    // One pipeline's runs, across both instances, one after another.
    for (const pipeline of ["alpha", "beta"]) {
      const runs = events
        .filter((event) => event.pipeline_id === pipeline)
        .sort((x, y) => Date.parse(x.started_at) - Date.parse(y.started_at));
      for (let i = 1; i < runs.length; i++) {
        const previous = runs[i - 1] as RunEvent;
        const current = runs[i] as RunEvent;
        expect(
          Date.parse(current.started_at),
          `${pipeline} run ${current.run_id}`,
        ).toBeGreaterThanOrEqual(Date.parse(previous.finished_at));
      }
    }
    await expectDestinationsAgree(dir, ["alpha", "beta"], uploads);
  });

  it("keep every 202 of 100 uploads spread over both when one is killed mid-run: each succeeds exactly once", async () => {
    const { dir, start, database } = await setup();
    const uploads = await makeUploads(dir, 100, ["alpha", "beta"], 5);
    const a = await start();
    const b = await start();
    const ofA = (claim: { claimedBy: string | null }) =>
      claim.claimedBy?.startsWith(`${hostname()}:${a.child.pid}:`) === true;
    let killedWhileHolding: string[] = [];
    try {
      let killed = false;
      const attempt = async (upload: Upload, url: string) => {
        try {
          const answer = await post(url, upload);
          if (answer.status === 202 || answer.status === 200) upload.runId = answer.runId;
        } catch {
          // A was killed under this request: retried on B below, with the same key.
        }
      };
      // Uploads keep arriving, spread over both, while A is killed holding a run.
      const sending = (async () => {
        for (let i = 0; i < uploads.length; i += 4) {
          await Promise.all(
            uploads
              .slice(i, i + 4)
              .map((upload) => attempt(upload, !killed && upload.index % 2 === 0 ? a.url : b.url)),
          );
        }
      })();
      for (let round = 0; round < 2000 && !killed; round++) {
        if ((await liveClaims(database)).some(ofA)) {
          // Frozen first, so a claim seen now is one it still holds when it dies.
          a.child.kill("SIGSTOP");
          const held = (await liveClaims(database)).filter(ofA).map((claim) => claim.runId);
          if (held.length > 0) {
            a.child.kill("SIGKILL");
            killedWhileHolding = held;
            killed = true;
            break;
          }
          a.child.kill("SIGCONT");
        }
      }
      await sending;
      expect(killedWhileHolding.length, "A was killed holding a run").toBeGreaterThan(0);
      await a.exited;
      // A retry with the same key on B: the original run if A had accepted it, else a new one.
      for (const upload of uploads.filter((u) => u.runId === undefined)) {
        await attempt(upload, b.url);
        expect(upload.runId, `upload ${upload.index}`).toBeDefined();
      }
      for (const upload of uploads) {
        expect(await finalStatus(b.url, upload.runId ?? ""), `upload ${upload.index}`).toEqual(
          expect.objectContaining({ status: "succeeded", error: null }),
        );
      }
      // Every run has finished. What A was receiving, or had finished without removing, when it
      // died stays until it is older than the grace period (another instance might still be
      // receiving it); then the next instance to start removes it.
      const longAgo = new Date(Date.now() - 2 * 60 * 60 * 1000);
      for (const name of await readdir(join(dir, "staging"))) {
        // B, still running, may remove a finished run's staging between the listing and here.
        await utimes(join(dir, "staging", name), longAgo, longAgo).catch(
          (error: NodeJS.ErrnoException) => {
            if (error.code !== "ENOENT") throw error;
          },
        );
      }
      // B took over exactly the runs A held when it died, and counted each, as a run that
      // resumed there.
      const metrics = await (
        await fetch(`${b.url}/metrics`, { headers: { Authorization: `Bearer ${TOKEN}` } })
      ).text();
      const takeovers = /^distributor_run_takeovers_total (\d+)$/m.exec(metrics)?.[1];
      expect(Number(takeovers)).toBe(killedWhileHolding.length);
      const resumed = b
        .stderr()
        .split("\n")
        .filter((line) => line.includes('"state":"resumed"'))
        .map((line) => (JSON.parse(line) as { run_id: string }).run_id)
        .sort();
      expect(resumed).toEqual([...killedWhileHolding].sort());
      const c = await start();
      c.child.kill("SIGTERM");
      await c.exited;
      expect(await readdir(join(dir, "staging"))).toEqual([]);
    } finally {
      a.child.kill("SIGKILL");
      b.child.kill("SIGTERM");
      await b.exited;
    }
    const succeeded = [...runEvents(a.stderr()), ...runEvents(b.stderr())].filter(
      (event) => event.status === "succeeded",
    );
    expect(succeeded.map((event) => event.run_id).sort()).toEqual(
      uploads.map((upload) => upload.runId).sort(),
    );
    // What A held when it died finished on B.
    const onB = new Set(runEvents(b.stderr()).map((event) => event.run_id));
    for (const runId of killedWhileHolding) expect(onB.has(runId), runId).toBe(true);
    await expectDestinationsAgree(dir, ["alpha", "beta"], uploads);
  });

  it("count a run taken over from an instance stopped inside it once, as taken_over and never failed, and both staging gauges return to zero", async () => {
    const { dir, start } = await setup();
    // Enough files that checking the staged bundle keeps A's run busy for a while: A is stopped
    // inside it. The second upload, accepted by A too, waits behind it (one pipeline).
    const [big] = (await makeUploads(dir, 1, ["alpha"], 4000)) as [Upload];
    const [, small] = (await makeUploads(join(dir, "small"), 2, ["alpha"], 5)) as [Upload, Upload];
    const scrape = async (serving: Serving) =>
      (
        await fetch(`${serving.url}/metrics`, { headers: { Authorization: `Bearer ${TOKEN}` } })
      ).text();
    const sample = (text: string, name: string) => {
      const match = new RegExp(`^${name.replace(/[{}]/g, "\\$&")} (\\S+)$`, "m").exec(text);
      return match === null ? undefined : Number(match[1]);
    };
    const runs = (text: string, status: string) =>
      sample(text, `distributor_runs_total{pipeline="alpha",status="${status}"}`);

    const a = await start();
    let b: Serving | undefined;
    try {
      const taken = await post(a.url, big);
      expect(taken.status).toBe(202);
      const waiting = await post(a.url, small);
      expect(waiting.status).toBe(202);
      const [bigRun, smallRun] = [taken.runId ?? "", waiting.runId ?? ""];
      big.runId = bigRun;
      small.runId = smallRun;
      for (
        let i = 0;
        i < 4000 && (await runStatus(a.url, bigRun, "0s")).status !== "running";
        i++
      ) {
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      // A stops inside the run, past its claim timeout; B takes the run over and publishes it,
      // and then the upload A accepted behind it.
      a.child.kill("SIGSTOP");
      b = await start();
      expect((await runStatus(b.url, bigRun, "0s")).status).toBe("running");
      expect(sample(await scrape(b), "distributor_staging_bytes")).toBeGreaterThan(4000 * 4000);
      for (const runId of [bigRun, smallRun]) {
        expect(await finalStatus(b.url, runId)).toMatchObject({ status: "succeeded", error: null });
      }
      a.child.kill("SIGCONT");
      // A wakes, its attempt ends, and it finds its claim lost.
      for (let i = 0; i < 400 && !a.stderr().includes('"state":"taken_over"'); i++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(a.stderr()).toContain('"state":"taken_over"');

      const [onA, onB] = [await scrape(a), await scrape(b)];
      expect(
        { taken_over: runs(onA, "taken_over"), failed: runs(onA, "failed") },
        "A's runs",
      ).toEqual({ taken_over: 1, failed: 0 });
      expect(runs(onA, "succeeded")).toBe(0);
      expect(
        { succeeded: runs(onB, "succeeded"), failed: runs(onB, "failed") },
        "B's runs",
      ).toEqual({ succeeded: 2, failed: 0 });
      expect(runs(onB, "taken_over")).toBe(0);
      expect(sample(onB, "distributor_run_takeovers_total")).toBe(1);
      expect(sample(onA, "distributor_run_takeovers_total")).toBe(0);
      // Nothing waits in staging, whichever instance accepted what.
      expect(sample(onA, "distributor_staging_bytes")).toBe(0);
      expect(sample(onB, "distributor_staging_bytes")).toBe(0);
      // A logs no finished run: each run's only end is B's.
      expect(runEvents(a.stderr())).toEqual([]);
      expect(
        runEvents(b.stderr())
          .map((event) => [event.run_id, event.status])
          .sort(),
      ).toEqual(
        [
          [bigRun, "succeeded"],
          [smallRun, "succeeded"],
        ].sort(),
      );
    } finally {
      a.child.kill("SIGCONT");
      a.child.kill("SIGTERM");
      b?.child.kill("SIGTERM");
      await Promise.all([a.exited, b?.exited]);
    }
    await expectStagingEmpties(dir);
    await expectDestinationsAgree(dir, ["alpha"], [big, small]);
  });

  it("cancel a run running on one instance when asked through the other", async () => {
    const { dir, start, database } = await setup();
    const [upload] = await makeUploads(dir, 1, ["alpha"], 2);
    // Another run's live lease holds the destination: the run waits inside it until stopped.
    const lease = join(dir, "alpha-site", ".distributor.lease.json");
    await mkdir(join(dir, "alpha-site"), { recursive: true });
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
    const instances = [await start(), await start()];
    try {
      const answer = await post((instances[0] as Serving).url, upload as Upload);
      expect(answer.status).toBe(202);
      const runId = answer.runId ?? "";
      let holder: Serving | undefined;
      for (let i = 0; i < 2000 && holder === undefined; i++) {
        const claim = (await liveClaims(database)).find((c) => c.runId === runId);
        holder = instances.find((serving) =>
          claim?.claimedBy?.startsWith(`${hostname()}:${serving.child.pid}:`),
        );
      }
      const other = instances.find((serving) => serving !== holder) as Serving;
      expect(holder).toBeDefined();
      for (
        let i = 0;
        i < 100 && (await runStatus(other.url, runId, "0s")).status !== "running";
        i++
      ) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const response = await fetch(`${other.url}/runs/${runId}/cancel`, {
        method: "POST",
        headers: { Authorization: `Bearer ${TOKEN}` },
      });
      expect(response.status).toBe(202);
      const record = await finalStatus(other.url, runId);
      expect(record).toMatchObject({ status: "failed", error: { code: "cancelled" } });
      // The holder stopped it: its log has the run, failed (the line may follow the record).
      for (let i = 0; i < 250 && runEvents((holder as Serving).stderr()).length === 0; i++) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(runEvents((holder as Serving).stderr())).toEqual([
        expect.objectContaining({ run_id: runId, status: "failed" }),
      ]);
    } finally {
      await rm(lease, { force: true });
      for (const serving of instances) serving.child.kill("SIGTERM");
      await Promise.all(instances.map((serving) => serving.exited));
    }
  });

  it("refuse to start when the database cannot be reached, naming the store and the cause", async () => {
    const dir = tempDir();
    await writeFile(join(dir, "distributor.yml"), configText(dir));
    // Port 1 on loopback: nothing listens there.
    const result = await runCli(["serve", "--config", "distributor.yml"], {
      cwd: dir,
      env: {
        REPORTER_TOKEN: TOKEN,
        DISTRIBUTOR_DATABASE_URL: "postgres://nobody:secret-password@127.0.0.1:1/none",
      },
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(
      "upload store (postgres, schema distributor): preparing the schema:",
    );
    expect(result.stderr).toContain("ECONNREFUSED");
    expect(result.stderr).not.toContain("secret-password");
  });

  it("refuse to start without the database URL's secret, naming its reference", async () => {
    const dir = tempDir();
    await writeFile(join(dir, "distributor.yml"), configText(dir));
    const result = await runCli(["serve", "--config", "distributor.yml"], {
      cwd: dir,
      env: { REPORTER_TOKEN: TOKEN, DISTRIBUTOR_DATABASE_URL: "" },
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("DISTRIBUTOR_DATABASE_URL");
  });

  it("keep serving through a database outage: 503 while it is away, alive but not ready, work resumes after", async () => {
    // A server of this test's own, since it is stopped mid-test.
    const own = await startPostgres();
    const dir = tempDir();
    await writeFile(join(dir, "distributor.yml"), configText(dir));
    const uploads = await makeUploads(dir, 2, ["alpha"], 2);
    const [first, second] = uploads as [Upload, Upload];
    const serving = await startServe(join(dir, "distributor.yml"), {
      cwd: dir,
      env: { REPORTER_TOKEN: TOKEN, DISTRIBUTOR_DATABASE_URL: own.url },
    });
    try {
      const accepted = await post(serving.url, first);
      expect(accepted.status).toBe(202);
      expect(await finalStatus(serving.url, accepted.runId ?? "")).toMatchObject({
        status: "succeeded",
      });

      await own.halt();
      const refused = await post(serving.url, second);
      expect(refused).toEqual({ status: 503, code: "store_unavailable", retryAfter: "5" });
      expect(serving.child.exitCode).toBeNull();
      // Liveness stays: a restart would not bring the database back. Readiness names the store.
      const health = await fetch(`${serving.url}/healthz`);
      expect({ status: health.status, body: await health.json() }).toEqual({
        status: 200,
        body: { ok: true },
      });
      const notReady = await fetch(`${serving.url}/readyz`);
      expect({ status: notReady.status, body: await notReady.json() }).toEqual({
        status: 503,
        body: {
          ready: false,
          checks: {
            store: expect.stringMatching(
              /^the store does not answer: upload store \(postgres, schema distributor\): checking for stalled sessions: .*ECONNREFUSED/,
            ),
            staging: "ok",
          },
        },
      });

      await own.resume();
      // The pool's connections broke with the server: the first requests after it is back may
      // still fail while they are replaced, as a producer's retry would find.
      let retried = await post(serving.url, second);
      for (let i = 0; i < 40 && retried.status === 503; i++) {
        await new Promise((resolve) => setTimeout(resolve, 250));
        retried = await post(serving.url, second);
      }
      expect(retried.status).toBe(202);
      const ready = await fetch(`${serving.url}/readyz`);
      expect({ status: ready.status, body: await ready.json() }).toEqual({
        status: 200,
        body: { ready: true, checks: { store: "ok", staging: "ok" } },
      });
      expect(await finalStatus(serving.url, retried.runId ?? "")).toMatchObject({
        status: "succeeded",
      });
      second.runId = retried.runId;
      first.runId = accepted.runId;
      await expectStagingEmpties(dir);
    } finally {
      serving.child.kill("SIGTERM");
      expect(await serving.exited, serving.stderr().slice(-3000)).toBe(0);
      await own.stop();
    }
    await expectDestinationsAgree(dir, ["alpha"], uploads);
  });

  it("hold a producer's upload --wait through a database restart: 503 with Retry-After while it is down, published exactly once", async () => {
    const own = await startPostgres();
    const dir = tempDir();
    await writeFile(join(dir, "distributor.yml"), configText(dir));
    const bundle = join(dir, "bundles", "outage");
    await writeBundle(bundle, "alpha.reports", createdOf(0), { "docs/report.md": "# Report\n" });
    const serving = await startServe(join(dir, "distributor.yml"), {
      cwd: dir,
      env: { REPORTER_TOKEN: TOKEN, DISTRIBUTOR_DATABASE_URL: own.url },
    });
    try {
      await own.halt();
      const producer = spawnCli(
        ["upload", "--server", serving.url, "--pipeline", "alpha", "--wait", bundle],
        { cwd: dir, env: { DISTRIBUTOR_UPLOAD_TOKEN: TOKEN } },
      );
      // The producer was told to come back, and will.
      for (let i = 0; i < 200 && !producer.stderr().includes("retrying in"); i++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(producer.stderr()).toMatch(
        /server answered 503 store_unavailable: the upload store is unavailable; retry later: .*ECONNREFUSED.* \(retry after 5s\); retrying in 5\.0s \(attempt 2\)/,
      );
      await own.resume();

      const result = await producer.done;
      expect(result.code, result.stderr).toBe(0);
      const runId = /^Upload: run_id=(\S+) pipeline=alpha status=succeeded /m.exec(
        result.stdout,
      )?.[1];
      expect(runId, result.stdout).toBeDefined();
      // One run: the retries carried the same idempotency key, and the store holds one record.
      const listed = await fetch(`${serving.url}/runs?pipeline=alpha`, {
        headers: { Authorization: `Bearer ${TOKEN}` },
      });
      expect(((await listed.json()) as { runs: { run_id: string }[] }).runs).toEqual([
        expect.objectContaining({ run_id: runId, status: "succeeded" }),
      ]);
      await expectStagingEmpties(dir);
    } finally {
      serving.child.kill("SIGTERM");
      expect(await serving.exited, serving.stderr().slice(-3000)).toBe(0);
      await own.stop();
    }
    expect(runEvents(serving.stderr())).toEqual([
      expect.objectContaining({ pipeline_id: "alpha", status: "succeeded" }),
    ]);
    // The destination holds that bundle, its state describing exactly its bytes.
    await expectDestinationsAgree(
      dir,
      ["alpha"],
      [{ index: 0, pipeline: "alpha", key: "", archive: Buffer.alloc(0) }],
    );
  });

  it("keep taking and publishing other pipelines' runs while an instance stalled taking one's run, and say so in /readyz", async () => {
    const dir = tempDir();
    const config = join(dir, "distributor.yml");
    // A stalled session of the store is ended after half the claim timeout: 2 s.
    const claimTimeoutMs = 4_000;
    await writeFile(config, configText(dir, "4s"));
    const database = await (postgres as TestPostgres).createDatabase(
      `stall_${randomUUID().replaceAll("-", "").slice(0, 12)}`,
    );
    const uploads = await makeUploads(dir, 3, ["alpha", "beta"], 2);
    const [alpha, beta, laterAlpha] = uploads as [Upload, Upload, Upload];
    const serving = await startServe(config, {
      cwd: dir,
      env: { REPORTER_TOKEN: TOKEN, DISTRIBUTOR_DATABASE_URL: database },
    });
    try {
      const readyz = async () => {
        const response = await fetch(`${serving.url}/readyz`);
        return {
          status: response.status,
          body: (await response.json()) as { ready: boolean; checks: Record<string, string> },
        };
      };
      expect((await readyz()).status).toBe(200);
      // Another instance stopped (SIGSTOP) in the middle of taking alpha's run: its session,
      // open and idle in its transaction, holds alpha's take lock.
      const stalled = await stallWhileTaking(database, { pipelineId: "alpha", claimTimeoutMs });
      let ended = false;
      void stalled.ended.then(() => {
        ended = true;
      });
      try {
        const started = Date.now();
        const accepted = await Promise.all(
          [alpha, beta].map((upload) => post(serving.url, upload)),
        );
        for (const [i, answer] of accepted.entries()) {
          expect(answer.status).toBe(202);
          (uploads[i] as Upload).runId = answer.runId;
        }
        // beta is taken and published as ever, well within the claim timeout.
        expect(await finalStatus(serving.url, beta.runId ?? "")).toMatchObject({
          status: "succeeded",
        });
        expect(Date.now() - started).toBeLessThan(claimTimeoutMs);
        // Meanwhile the stall is what /readyz reports, naming the session and the pipeline.
        let report = await readyz();
        while (report.status === 200 && !ended) {
          await new Promise((resolve) => setTimeout(resolve, 100));
          report = await readyz();
        }
        expect(report).toEqual({
          status: 503,
          body: {
            ready: false,
            checks: {
              store: expect.stringMatching(
                new RegExp(
                  `^blocked: PostgreSQL session ${stalled.pid} \\(distributor distributor stalled-while-taking, idle in transaction\\) has held the lock for taking runs of pipeline alpha for [0-9.]+s`,
                ),
              ),
              staging: "ok",
            },
          },
        });
        expect(ended, "the stalled session outlived the report").toBe(false);
        expect((await runStatus(serving.url, alpha.runId ?? "", "0s")).status).toBe("queued");

        // PostgreSQL ends the stalled session, and alpha's run goes on.
        expect(await stalled.ended).toMatch(/idle-in-transaction timeout/);
        expect(Date.now() - started).toBeLessThan(claimTimeoutMs);
        expect(await finalStatus(serving.url, alpha.runId ?? "")).toMatchObject({
          status: "succeeded",
        });
        const later = await post(serving.url, laterAlpha);
        expect(later.status).toBe(202);
        laterAlpha.runId = later.runId;
        expect(await finalStatus(serving.url, laterAlpha.runId ?? "")).toMatchObject({
          status: "succeeded",
        });
        expect(await readyz()).toEqual({
          status: 200,
          body: { ready: true, checks: { store: "ok", staging: "ok" } },
        });
      } finally {
        await stalled.release();
      }
    } finally {
      serving.child.kill("SIGTERM");
      expect(await serving.exited, serving.stderr().slice(-3000)).toBe(0);
    }
    // Each run executed once.
    expect(
      runEvents(serving.stderr())
        .map((event) => event.run_id)
        .sort(),
    ).toEqual(uploads.map((upload) => upload.runId).sort());
    await expectDestinationsAgree(dir, ["alpha", "beta"], uploads);
  });
});
