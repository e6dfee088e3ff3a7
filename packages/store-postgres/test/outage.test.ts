import { sampleRun } from "@distributor/upload-store/testing";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { openPostgresUploadStore } from "../src/index.js";
import { startPostgres, type TestPostgres } from "../src/testing/index.js";
import { postgresRequired } from "./global-setup.js";

// The database going away and coming back, on a server of this test's own (the shared one
// serves the other suites meanwhile): calls fail with store_unavailable instead of hanging or
// crashing the process, and work again once the database is back, with nothing accepted lost.

let server: TestPostgres | null = null;
try {
  server = await startPostgres();
} catch (error) {
  if (postgresRequired()) throw error;
  console.warn(`PostgreSQL outage test skipped: ${(error as Error).message}`);
}
afterAll(async () => {
  await server?.stop();
});

describe.skipIf(server === null)("postgres store when the database goes away", () => {
  it("fails calls with store_unavailable while it is away and serves them again once it is back", async () => {
    const postgres = server as TestPostgres;
    const store = await openPostgresUploadStore({
      url: postgres.url,
      queueSize: 4,
      retentionMs: 60_000,
      maxRuns: 10,
      connectTimeoutMs: 2_000,
      queryTimeoutMs: 2_000,
    });
    try {
      const sample = sampleRun();
      expect(await store.reserveQueueSlot()).toBe(true);
      await store.enqueue(sample.run, sample.job, sample.accepted, undefined);

      await postgres.halt();
      await expect(store.getRun(sample.runId)).rejects.toMatchObject({
        code: "store_unavailable",
        message: expect.stringContaining(
          "upload store (postgres, schema distributor): reading a run:",
        ),
      });
      await expect(store.takeNext(new Set())).rejects.toMatchObject({ code: "store_unavailable" });

      await postgres.resume();
      expect(await store.getRun(sample.runId)).toEqual(sample.run);
      expect(await store.takeNext(new Set())).toEqual(sample.job);
    } finally {
      await store.close();
    }
  });

  it("releases again, once the database is back, a key whose release failed while it was away", async () => {
    const postgres = server as TestPostgres;
    const url = await postgres.createDatabase("unreleased_keys");
    const open = (instanceId: string) =>
      openPostgresUploadStore({
        url,
        instanceId,
        queueSize: 4,
        retentionMs: 60_000,
        maxRuns: 10,
        connectTimeoutMs: 2_000,
        queryTimeoutMs: 2_000,
        heartbeatIntervalMs: 100,
      });
    const a = await open("a");
    const b = await open("b");
    try {
      const scope = { tokenId: "producer", pipelineId: "reports", key: "build-7" };
      expect(await a.claimKey(scope)).toEqual({ kind: "claimed" });
      // The upload is refused, and the database goes away before the key is released.
      await postgres.halt();
      await expect(a.releaseKey(scope)).rejects.toMatchObject({ code: "store_unavailable" });
      await postgres.resume();
      // Another instance's request with the key waits for A, which is alive, at most until A's
      // next heartbeat after the database came back releases it.
      let onB = await b.claimKey(scope);
      if (onB.kind === "pending") {
        const waited = await Promise.race([
          onB.settled.then(() => "settled"),
          new Promise((resolve) => setTimeout(resolve, 5_000, "still waiting")),
        ]);
        expect(waited).toBe("settled");
        onB = await b.claimKey(scope);
      }
      expect(onB).toEqual({ kind: "claimed" });
      await b.releaseKey(scope);
      // A's own next request with the key is not left waiting for the release that failed.
      expect(await a.claimKey(scope)).toEqual({ kind: "claimed" });
    } finally {
      await a.close();
      await b.close();
    }
  });

  it("answers store_failed, not store_unavailable, for a fault that no wait mends", async () => {
    const postgres = server as TestPostgres;
    const url = await postgres.createDatabase("broken_store");
    const store = await openPostgresUploadStore({
      url,
      queueSize: 4,
      retentionMs: 60_000,
      maxRuns: 10,
    });
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      // The database answers, but the store's table is gone: a retry would meet the same.
      await client.query("DROP TABLE distributor.upload_runs CASCADE");
      const failure = store.getRun("run-1");
      await expect(failure).rejects.toMatchObject({
        code: "store_failed",
        message: expect.stringContaining('reading a run: relation "distributor.upload_runs"'),
      });
    } finally {
      await client.end();
      await store.close();
    }
  });
});
