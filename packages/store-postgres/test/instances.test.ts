import { randomUUID } from "node:crypto";
import type { UploadStore } from "@distributor/upload-store";
import { sampleRun } from "@distributor/upload-store/testing";
import pg from "pg";
import { afterEach, describe, expect, inject, it } from "vitest";
import { openPostgresUploadStore } from "../src/index.js";
import { stallWhileTaking } from "../src/testing/index.js";

// docs/integrations/http-upload.md, several instances, on one real PostgreSQL: two stores of one schema stand for two
// `serve` processes. A "dead" instance is one whose heartbeats stopped: its row is aged by hand,
// exactly what the claim timeout measures, instead of waiting in real time.

const url = inject("postgresUrl");
const LIMITS = { queueSize: 50, retentionMs: 60_000, maxRuns: 100 };
const CLAIM_TIMEOUT_MS = 60_000;

let opened: UploadStore[] = [];
let schemas: string[] = [];

async function sql(text: string, params: unknown[] = []) {
  const client = new pg.Client({ connectionString: url ?? "" });
  await client.connect();
  try {
    return await client.query(text, params);
  } finally {
    await client.end();
  }
}

async function instances(count: number) {
  const schema = `instances_${randomUUID().replaceAll("-", "").slice(0, 16)}`;
  schemas.push(schema);
  const stores: UploadStore[] = [];
  for (let i = 0; i < count; i++) {
    const store = await openPostgresUploadStore({
      ...LIMITS,
      url: url ?? "",
      schema,
      instanceId: `instance-${i}`,
      claimTimeoutMs: CLAIM_TIMEOUT_MS,
      // No renewal during a test: an instance is alive from its start until `stall` ages it.
      heartbeatIntervalMs: 10 * CLAIM_TIMEOUT_MS,
      poolSize: 2,
    });
    stores.push(store);
    opened.push(store);
  }
  /**
   * Ages an instance's heartbeat past the claim timeout, as if it had died (or stalled) that long
   * ago; its store stays open, as a stalled process would come back to it.
   */
  const stall = async (index: number) => {
    await sql(
      `UPDATE "${schema}".upload_instances SET heartbeat_at = now() - interval '1 hour' WHERE id = $1`,
      [`instance-${index}`],
    );
  };
  return { stores, stall };
}

async function accept(store: UploadStore, pipeline = "reports") {
  const sample = sampleRun(pipeline);
  expect(await store.reserveQueueSlot()).toBe(true);
  await store.enqueue(sample.run, sample.job, sample.accepted, undefined);
  return sample;
}

afterEach(async () => {
  for (const store of opened) await store.close().catch(() => undefined);
  for (const schema of schemas) await sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  opened = [];
  schemas = [];
});

describe.skipIf(url === null)("postgres store shared by several instances", () => {
  it("shows a run accepted by one instance to the other, and hands it out once", async () => {
    const {
      stores: [a, b],
    } = await instances(2);
    if (a === undefined || b === undefined) throw new Error("two stores");
    const sample = await accept(a);
    expect(await b.getRun(sample.runId)).toEqual(sample.run);
    const taken = await Promise.all([a.takeNext(new Set()), b.takeNext(new Set())]);
    expect(taken.filter((job) => job !== undefined)).toEqual([sample.job]);
  });

  it("never hands out two runs of one pipeline at once, across instances", async () => {
    const {
      stores: [a, b],
    } = await instances(2);
    if (a === undefined || b === undefined) throw new Error("two stores");
    const first = await accept(a, "reports");
    const second = await accept(b, "reports");
    const other = await accept(b, "other");
    expect(await a.takeNext(new Set())).toEqual(first.job);
    // b's own busy set is empty: the database alone knows a's run of `reports` is live.
    expect(await b.takeNext(new Set())).toEqual(other.job);
    expect(await b.takeNext(new Set())).toBeUndefined();
    await a.updateRun(first.runId, { status: "succeeded", finished_at: new Date().toISOString() });
    expect(await b.takeNext(new Set())).toEqual(second.job);
  });

  it("goes on taking other pipelines' runs while a stalled instance holds one's take, reports it, until PostgreSQL ends its session", async () => {
    const schema = `instances_${randomUUID().replaceAll("-", "").slice(0, 16)}`;
    schemas.push(schema);
    // Heartbeats at their usual rate: the instances stay alive through the test. A stalled
    // session is ended after half the claim timeout, 2 s.
    const claimTimeoutMs = 4_000;
    const b = await openPostgresUploadStore({
      ...LIMITS,
      url: url ?? "",
      schema,
      instanceId: "instance-b",
      claimTimeoutMs,
      poolSize: 2,
    });
    opened.push(b);
    const alpha = await accept(b, "alpha");
    const beta = await accept(b, "beta");
    expect(await b.readiness?.()).toBe("ok");
    // Another instance stopped while taking alpha's run: its transaction holds alpha's lock.
    const stalled = await stallWhileTaking(url ?? "", {
      schema,
      pipelineId: "alpha",
      claimTimeoutMs,
    });
    try {
      const started = Date.now();
      expect(await b.takeNext(new Set())).toEqual(beta.job);
      expect(await b.takeNext(new Set())).toBeUndefined();
      expect(Date.now() - started, "no take waited for the stalled one").toBeLessThan(500);
      // Past a second the store reports the stall, naming the session and the pipeline.
      let report = await b.readiness?.();
      let ended = false;
      void stalled.ended.then(() => {
        ended = true;
      });
      while (report === "ok" && !ended) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        report = await b.readiness?.();
      }
      expect(report).toMatch(
        new RegExp(
          `^blocked: PostgreSQL session ${stalled.pid} \\(distributor ${schema} stalled-while-taking, idle in transaction\\) has held the lock for taking runs of pipeline alpha for [0-9.]+s; no instance takes its runs until the session ends$`,
        ),
      );
      // The stalled session idles in its transaction until the server ends it.
      expect(await stalled.ended).toMatch(/idle-in-transaction timeout/);
      expect(Date.now() - started).toBeLessThan(claimTimeoutMs);
      expect(await b.takeNext(new Set())).toEqual(alpha.job);
      expect(await b.readiness?.()).toBe("ok");
    } finally {
      await stalled.release();
    }
  });

  it("hands a dead instance's running run to another, and ignores the dead one's late changes", async () => {
    const {
      stores: [a, b],
      stall,
    } = await instances(2);
    if (a === undefined || b === undefined) throw new Error("two stores");
    const sample = await accept(a);
    expect(await a.takeNext(new Set())).toEqual(sample.job);
    await a.updateRun(sample.runId, { status: "running", started_at: new Date().toISOString() });
    // While a is alive, nothing is handed out.
    expect(await b.takeNext(new Set())).toBeUndefined();
    expect(await b.queueLength()).toBe(0);

    await stall(0);
    expect(await b.queueLength()).toBe(1);
    // Handed out as a takeover: the server counts it and logs the run as resumed.
    expect(await b.takeNext(new Set())).toEqual({ ...sample.job, takenOver: true });
    await b.updateRun(sample.runId, { status: "running", started_at: new Date().toISOString() });

    // The first instance was only stalled: it comes back and reports its run, and is refused —
    // every time, not only the first (a second change once slipped through without a token).
    expect(
      await a.updateRun(sample.runId, { status: "running", started_at: new Date().toISOString() }),
    ).toBe(false);
    expect(
      await a.updateRun(sample.runId, { status: "failed", finished_at: new Date().toISOString() }),
    ).toBe(false);
    expect((await b.getRun(sample.runId))?.record.status).toBe("running");
    expect(
      await b.updateRun(sample.runId, {
        status: "succeeded",
        finished_at: new Date().toISOString(),
      }),
    ).toBe(true);
    expect((await b.getRun(sample.runId))?.record.status).toBe("succeeded");
  });

  it("lets a key staged by a dead instance be claimed again, and waits for a live one", async () => {
    const {
      stores: [a, b],
      stall,
    } = await instances(2);
    if (a === undefined || b === undefined) throw new Error("two stores");
    const scope = { tokenId: "reporter", pipelineId: "reports", key: "shared-key" };
    expect(await a.claimKey(scope)).toEqual({ kind: "claimed" });
    const waiting = await b.claimKey(scope);
    expect(waiting.kind).toBe("pending");
    const sample = sampleRun();
    expect(await a.reserveQueueSlot()).toBe(true);
    await a.enqueue(sample.run, sample.job, sample.accepted, scope);
    if (waiting.kind === "pending") await waiting.settled;
    expect(await b.claimKey(scope)).toEqual({
      kind: "accepted",
      accepted: sample.accepted,
      configDigest: sample.job.configDigest,
    });

    const other = { ...scope, key: "abandoned" };
    expect(await a.claimKey(other)).toEqual({ kind: "claimed" });
    await stall(0);
    expect(await b.claimKey(other)).toEqual({ kind: "claimed" });
  });

  it("passes a request to stop a run from one instance to the one holding it", async () => {
    const {
      stores: [a, b],
    } = await instances(2);
    if (a === undefined || b === undefined) throw new Error("two stores");
    const sample = await accept(a);
    const other = await accept(a, "other");
    expect(await a.takeNext(new Set())).toEqual(sample.job);
    expect(await a.cancelRequests?.([sample.runId, other.runId])).toEqual(new Map());
    await b.requestCancel?.(sample.runId, "cancelled by token reporter");
    expect(await a.cancelRequests?.([sample.runId, other.runId])).toEqual(
      new Map([[sample.runId, "cancelled by token reporter"]]),
    );
    // A finished run is no longer asked about.
    await a.updateRun(sample.runId, { status: "failed", finished_at: new Date().toISOString() });
    expect(await a.cancelRequests?.([sample.runId])).toEqual(new Map());
  });

  it("wakes a long-poll on one instance when another changes the run", async () => {
    const {
      stores: [a, b],
    } = await instances(2);
    if (a === undefined || b === undefined) throw new Error("two stores");
    const sample = await accept(a);
    await b.getRun(sample.runId);
    const started = Date.now();
    const watching = b.watchRun(sample.runId, 30_000);
    await a.updateRun(sample.runId, { status: "running" });
    await watching;
    // A change between the caller's read and its watch counts too: the watch starts from what
    // this process last read.
    await b.getRun(sample.runId);
    await a.updateRun(sample.runId, { status: "succeeded", finished_at: new Date().toISOString() });
    await b.watchRun(sample.runId, 30_000);
    expect(Date.now() - started).toBeLessThan(20_000);
  });
});
