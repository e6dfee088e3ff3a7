import { afterEach, describe, expect, it } from "vitest";
import type {
  AcceptedUpload,
  IdempotencyScope,
  StoredRun,
  StoreLimits,
  UploadJob,
  UploadRunRecord,
  UploadStore,
} from "../store.js";

export type { StoreLimits };

/** A fresh, empty store for one test. */
export interface UploadStoreFixture {
  store: UploadStore;
  /**
   * For a durable store: closes nothing, opens the same store again as a restarted process would
   * (the previous instance is abandoned, as after `kill -9`).
   */
  reopen?: () => Promise<UploadStore>;
  /** Runs after the test, e.g. to remove a directory or drop a database. */
  cleanup?: () => Promise<void>;
}

export type UploadStoreFactory = (limits: StoreLimits) => Promise<UploadStoreFixture>;

const LIMITS: StoreLimits = { queueSize: 4, retentionMs: 60_000, maxRuns: 3 };
const T0 = Date.parse("2026-06-04T12:00:00Z");
const at = (ms: number) => new Date(T0 + ms).toISOString();

let counter = 0;

/** A queued run of `pipeline` owned by `token`, with its job and accepted body. */
export function sampleRun(pipeline = "reports", token = "reporter") {
  counter += 1;
  const runId = `run-${String(counter).padStart(6, "0")}`;
  const manifest = { id: `bundle.${counter}`, digest: `sha256:${counter}`, created: at(0) };
  const record: UploadRunRecord = {
    run_id: runId,
    pipeline_id: pipeline,
    status: "queued",
    accepted_at: at(counter),
    started_at: null,
    finished_at: null,
    manifest,
    result: null,
    error: null,
  };
  const run: StoredRun = { record, tokenId: token };
  const job: UploadJob = {
    runId,
    pipelineId: pipeline,
    stagingDirectory: `/staging/upload-${counter}`,
    bundleDirectory: `/staging/upload-${counter}/bundle`,
    configDigest: `sha256:config-of-${pipeline}`,
  };
  const accepted: AcceptedUpload = {
    run_id: runId,
    pipeline_id: pipeline,
    status: "queued",
    manifest,
    status_url: `/runs/${runId}`,
  };
  return { runId, run, job, accepted };
}

/**
 * Registers the behaviour every `UploadStore` shares as vitest tests (docs/integrations/http-upload.md): idempotency
 * claims, the bounded queue and its order, run records, expiry by retention and count, paging, and
 * for durable stores, that everything accepted survives a restart.
 */
export function describeUploadStoreContract(name: string, factory: UploadStoreFactory): void {
  describe(`${name} upload store contract`, () => {
    let fixtures: UploadStoreFixture[] = [];
    const open = async (limits: Partial<StoreLimits> = {}) => {
      const fixture = await factory({ ...LIMITS, ...limits });
      fixtures.push(fixture);
      return fixture;
    };
    afterEach(async () => {
      for (const fixture of fixtures) {
        await fixture.store.close().catch(() => undefined);
        await fixture.cleanup?.();
      }
      fixtures = [];
    });

    const accept = async (store: UploadStore, sample = sampleRun(), scope?: IdempotencyScope) => {
      expect(await store.reserveQueueSlot()).toBe(true);
      await store.enqueue(sample.run, sample.job, sample.accepted, scope);
      return sample;
    };
    const finish = (store: UploadStore, runId: string, ms: number) =>
      store.updateRun(runId, { status: "succeeded", finished_at: at(ms) });

    it("claims a key once, lets it go on release, and replays it once accepted", async () => {
      const { store } = await open();
      const scope = { tokenId: "reporter", pipelineId: "reports", key: "k 1" };
      expect(await store.claimKey(scope)).toEqual({ kind: "claimed" });
      const pending = await store.claimKey(scope);
      expect(pending.kind).toBe("pending");
      await store.releaseKey(scope);
      if (pending.kind === "pending") await pending.settled;
      expect(await store.claimKey(scope)).toEqual({ kind: "claimed" });
      const waiting = await store.claimKey(scope);
      const sample = await accept(store, sampleRun(), scope);
      if (waiting.kind === "pending") await waiting.settled;
      // With the digest of the configuration that accepted it, so that a replay is answered only
      // under that configuration.
      expect(await store.claimKey(scope)).toEqual({
        kind: "accepted",
        accepted: sample.accepted,
        configDigest: "sha256:config-of-reports",
      });
      // A job without a digest (accepted by an earlier version) binds a key without one.
      const earlierScope = { ...scope, key: "earlier" };
      expect(await store.claimKey(earlierScope)).toEqual({ kind: "claimed" });
      const earlier = sampleRun();
      const { configDigest: _, ...earlierJob } = earlier.job;
      await accept(store, { ...earlier, job: earlierJob }, earlierScope);
      expect(await store.claimKey(earlierScope)).toEqual({
        kind: "accepted",
        accepted: earlier.accepted,
      });
      // Another token's or pipeline's same key is another key.
      expect(await store.claimKey({ ...scope, tokenId: "other" })).toEqual({ kind: "claimed" });
      expect(await store.claimKey({ ...scope, pipelineId: "other" })).toEqual({
        kind: "claimed",
      });
    });

    it("bounds queued jobs and reserved places by queue_size", async () => {
      const { store } = await open({ queueSize: 2 });
      expect(await store.reserveQueueSlot()).toBe(true);
      expect(await store.reserveQueueSlot()).toBe(true);
      expect(await store.reserveQueueSlot()).toBe(false);
      await store.releaseQueueSlot();
      const sample = sampleRun();
      // The job takes the place reserved for it.
      await store.enqueue(sample.run, sample.job, sample.accepted, undefined);
      expect(await store.queueLength()).toBe(1);
      expect(await store.reserveQueueSlot()).toBe(true);
      expect(await store.reserveQueueSlot()).toBe(false);
      expect(await store.takeNext(new Set())).toEqual(sample.job);
      expect(await store.queueLength()).toBe(1);
    });

    it("hands out jobs oldest first, skipping busy pipelines, each once", async () => {
      const { store } = await open();
      const a = await accept(store, sampleRun("reports"));
      const b = await accept(store, sampleRun("reports"));
      const c = await accept(store, sampleRun("other"));
      expect(await store.takeNext(new Set(["reports"]))).toEqual(c.job);
      expect(await store.takeNext(new Set())).toEqual(a.job);
      expect(await store.dequeue(b.runId)).toEqual(b.job);
      expect(await store.dequeue(b.runId)).toBeUndefined();
      expect(await store.takeNext(new Set())).toBeUndefined();
    });

    it("sums the staged bytes of live runs' jobs, whichever of them finished", async () => {
      const { store } = await open();
      expect(await store.stagedBytes()).toBe(0);
      const sized = (bytes: number) => {
        const sample = sampleRun();
        return { ...sample, job: { ...sample.job, stagedBytes: bytes } };
      };
      const first = await accept(store, sized(1000));
      const second = await accept(store, sized(234));
      // A job accepted by an earlier version carries no size: it counts as none.
      await accept(store, sampleRun("other"));
      expect(await store.stagedBytes()).toBe(1234);
      expect(await store.takeNext(new Set())).toEqual(first.job);
      await store.updateRun(first.runId, { status: "running", started_at: at(1) });
      expect(await store.stagedBytes()).toBe(1234);
      await finish(store, first.runId, 2);
      expect(await store.stagedBytes()).toBe(234);
      await store.dequeue(second.runId);
      await store.updateRun(second.runId, { status: "failed", finished_at: at(3) });
      expect(await store.stagedBytes()).toBe(0);
    });

    it("keeps run records and their changes", async () => {
      const { store } = await open();
      const sample = await accept(store);
      expect(await store.getRun(sample.runId)).toEqual(sample.run);
      await store.updateRun(sample.runId, { status: "running", started_at: at(5) });
      expect((await store.getRun(sample.runId))?.record).toMatchObject({
        status: "running",
        started_at: at(5),
      });
      expect(await store.getRun("missing")).toBeUndefined();
      expect(await store.size()).toBe(1);
    });

    it("wakes a watcher when the run changes, and otherwise after its timeout", async () => {
      const { store } = await open();
      const sample = await accept(store);
      const started = Date.now();
      await store.watchRun(sample.runId, 50);
      expect(Date.now() - started).toBeGreaterThanOrEqual(40);
      const watching = store.watchRun(sample.runId, 10_000);
      await store.updateRun(sample.runId, { status: "running" });
      await watching;
      expect(Date.now() - started).toBeLessThan(5_000);
    });

    it("forgets finished runs after the retention, with their keys; live runs stay", async () => {
      const { store } = await open();
      const scope = { tokenId: "reporter", pipelineId: "reports", key: "old" };
      await store.claimKey(scope);
      const old = await accept(store, sampleRun(), scope);
      const live = await accept(store);
      await finish(store, old.runId, 0);
      await store.expire(new Date(T0 + LIMITS.retentionMs - 1));
      expect(await store.getRun(old.runId)).toBeDefined();
      await store.expire(new Date(T0 + LIMITS.retentionMs));
      expect(await store.getRun(old.runId)).toBeUndefined();
      expect(await store.claimKey(scope)).toEqual({ kind: "claimed" });
      expect(await store.getRun(live.runId)).toBeDefined();
    });

    it("keeps at most max_runs finished records, forgetting the oldest first", async () => {
      const { store } = await open({ maxRuns: 2, queueSize: 10 });
      const samples = [];
      for (let i = 0; i < 4; i++) samples.push(await accept(store));
      const live = await accept(store);
      for (const [i, sample] of samples.entries()) await finish(store, sample.runId, i);
      await store.expire(new Date(T0));
      const kept = [];
      for (const sample of [...samples, live]) {
        if ((await store.getRun(sample.runId)) !== undefined) kept.push(sample.runId);
      }
      expect(kept).toEqual([samples[2]?.runId, samples[3]?.runId, live.runId]);
      expect(await store.size()).toBe(3);
    });

    it("lists a token's runs newest first, filtered and paged", async () => {
      const { store } = await open({ queueSize: 10 });
      const a = await accept(store, sampleRun("reports"));
      const b = await accept(store, sampleRun("other"));
      const c = await accept(store, sampleRun("reports"));
      await accept(store, sampleRun("reports", "someone-else"));
      await finish(store, a.runId, 1);
      const all = await store.listRuns({ tokenId: "reporter", limit: 10 });
      expect(all.runs.map((r) => r.run_id)).toEqual([c.runId, b.runId, a.runId]);
      expect(all.next_cursor).toBeNull();
      const first = await store.listRuns({ tokenId: "reporter", limit: 2 });
      expect(first.runs.map((r) => r.run_id)).toEqual([c.runId, b.runId]);
      expect(first.next_cursor).not.toBeNull();
      const second = await store.listRuns({
        tokenId: "reporter",
        limit: 2,
        cursor: first.next_cursor ?? "",
      });
      expect(second).toEqual({
        runs: [expect.objectContaining({ run_id: a.runId })],
        next_cursor: null,
      });
      const filtered = await store.listRuns({
        tokenId: "reporter",
        limit: 10,
        pipelineId: "reports",
        status: "queued",
      });
      expect(filtered.runs.map((r) => r.run_id)).toEqual([c.runId]);
    });

    it("keeps everything accepted across a restart, and queues a running run again", async () => {
      const fixture = await open({ queueSize: 10 });
      if (fixture.reopen === undefined) return;
      const { store } = fixture;
      const scope = { tokenId: "reporter", pipelineId: "reports", key: "durable" };
      await store.claimKey(scope);
      const running = await accept(store, sampleRun("reports"), scope);
      const queued = await accept(store, sampleRun("reports"));
      const done = await accept(store, sampleRun("other"));
      expect(await store.takeNext(new Set())).toEqual(running.job);
      await store.updateRun(running.runId, { status: "running", started_at: at(3) });
      expect(await store.takeNext(new Set(["reports"]))).toEqual(done.job);
      await finish(store, done.runId, 4);

      // The first instance is abandoned without close(), like a killed process.
      const again = await fixture.reopen();
      fixtures.push({ store: again });
      expect(await again.recover()).toEqual([running.job, queued.job]);
      expect((await again.getRun(running.runId))?.record).toMatchObject({
        status: "queued",
        started_at: null,
      });
      expect((await again.getRun(done.runId))?.record).toMatchObject({ status: "succeeded" });
      expect(await again.claimKey(scope)).toEqual({
        kind: "accepted",
        accepted: running.accepted,
        configDigest: running.job.configDigest,
      });
      expect(await again.takeNext(new Set())).toEqual(running.job);
      expect(await again.takeNext(new Set(["reports"]))).toBeUndefined();
      expect(await again.queueLength()).toBe(1);
      const later = await accept(again, sampleRun("other"));
      const page = await again.listRuns({ tokenId: "reporter", limit: 1 });
      expect(page.runs[0]?.run_id).toBe(later.runId);
    });
  });
}
