import { createHash, randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import v8 from "node:v8";
import vm from "node:vm";
import type { RunActionReport, RunReport } from "@distributor/publish";
import type { StoreLimits, UploadRunRecord, UploadStore } from "@distributor/upload-store";
import { RunRecordSchema } from "@distributor/upload-store/wire";
import * as v from "valibot";
import { afterEach, describe, expect, it } from "vitest";
import { openEmbeddedUploadStore } from "../src/store/embedded-store.js";
import { createMemoryUploadStore, DEFAULT_MAX_RUNS } from "../src/store/memory-store.js";
import { summarizeRun } from "../src/summary.js";

// What 10 000 finished runs cost the server's heap (docs/operations.md states the bound): the
// stores that hold records in the process (memory, embedded) are filled through the store API the
// server uses, each run accepted with an idempotency key, taken, started and finished with the
// summary of a run report of two destinations and many outputs, as the server records it. The
// heap is measured after full garbage collections, so the growth is what the records keep alive.
// (The postgres store keeps records in the database, not in the heap.)

/**
 * Heap growth allowed for 10 000 finished runs (the default `max_runs`): 3.3 KiB per run. Measured
 * on Node 20: about 24 MiB (memory), 19 MiB (embedded) and 23 MiB (embedded, reopened).
 */
const HEAP_BOUND_MIB = 32;
const RUNS = DEFAULT_MAX_RUNS;
/** Runs in flight at once while filling (the server's workers and requests overlap too). */
const CONCURRENCY = 64;
const OUTPUTS_PER_ACTION = 40;

v8.setFlagsFromString("--expose-gc");
const gc = vm.runInNewContext("gc") as () => void;

function heapUsed(): number {
  // Weak references and finalizers need more than one pass to let go.
  for (let pass = 0; pass < 4; pass++) gc();
  return process.memoryUsage().heapUsed;
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

const LIMITS: StoreLimits = {
  queueSize: 2 * CONCURRENCY,
  retentionMs: 24 * 3600_000,
  maxRuns: RUNS,
};

interface Opened {
  store: UploadStore;
  /** Durable stores: closes the store and opens it again from what it wrote, as a restart does. */
  restart?: () => Promise<UploadStore>;
}

const stores: [string, (limits: StoreLimits) => Promise<Opened>][] = [
  ["memory", async (limits) => ({ store: createMemoryUploadStore(limits) })],
  [
    "embedded",
    async (limits) => {
      const root = await mkdtemp(join(tmpdir(), "distributor-heap-"));
      const path = join(root, "store");
      let current = await openEmbeddedUploadStore({ ...limits, path });
      cleanups.push(async () => {
        await current.close();
        await rm(root, { recursive: true, force: true });
      });
      const restart = async () => {
        await current.close();
        current = await openEmbeddedUploadStore({ ...limits, path });
        return current;
      };
      return { store: current, restart };
    },
  ],
];

/** The report of a run of two destinations, as the run workflow returns it. */
function report(index: number, failed: boolean): RunReport {
  const action = (destination: string): RunActionReport => ({
    pipeline_id: "reports",
    destination_id: destination,
    bundle_path: `reports/2026-06-04/${index}`,
    source_id: "upload",
    signer: null,
    action: "publish_new",
    reason: "new bundle",
    status: failed && destination === "archive" ? "failed" : "published",
    primary_url: `https://reports.example.com/${destination}/reports/2026-06-04/${index}/index.html`,
    release_id: null,
    preview_url: null,
    outputs: Array.from({ length: OUTPUTS_PER_ACTION }, (_, file) => ({
      path: `reports/2026-06-04/${index}/page-${file}.html`,
      kind: "generated" as const,
      source_path: `page-${file}.md`,
      transform: "markdown_to_html",
      url: `https://reports.example.com/${destination}/reports/2026-06-04/${index}/page-${file}.html`,
      sha256: createHash("sha256").update(`${index}/${file}`).digest("hex"),
      size: 4096 + file,
    })),
    error:
      failed && destination === "archive"
        ? { code: "destination_failed", message: `write failed: ${"EIO ".repeat(100)}` }
        : null,
    warnings: [],
  });
  return {
    dry_run: false,
    actions: [action("site"), action("archive")],
    pipeline_errors: [],
    warnings: [],
    interrupted: false,
  };
}

/** One upload's life as the server drives it: accepted with a key, taken, run, finished. */
async function finishOne(store: UploadStore, index: number): Promise<void> {
  expect(await store.reserveQueueSlot()).toBe(true);
  const runId = randomUUID();
  const scope = { tokenId: "reporter", pipelineId: "reports", key: randomUUID() };
  expect(await store.claimKey(scope)).toEqual({ kind: "claimed" });
  const manifest = {
    id: `reports.2026-06-04.${index}`,
    digest: `sha256:${createHash("sha256").update(String(index)).digest("hex")}`,
    created: "2026-06-04T11:55:00Z",
  };
  const record: UploadRunRecord = {
    run_id: runId,
    pipeline_id: "reports",
    status: "queued",
    accepted_at: new Date().toISOString(),
    started_at: null,
    finished_at: null,
    manifest,
    result: null,
    error: null,
  };
  const staging = `/var/lib/distributor/staging/upload-${runId}`;
  await store.enqueue(
    { record, tokenId: "reporter" },
    { runId, pipelineId: "reports", stagingDirectory: staging, bundleDirectory: staging },
    {
      run_id: runId,
      pipeline_id: "reports",
      status: "queued",
      manifest,
      status_url: `/runs/${runId}`,
    },
    scope,
  );
  const job = await store.takeNext(new Set());
  if (job === undefined) throw new Error("the queue is empty after an enqueue");
  await store.updateRun(job.runId, { status: "running", started_at: new Date().toISOString() });
  const failed = index % 10 === 0;
  await store.updateRun(job.runId, {
    status: failed ? "failed" : "succeeded",
    finished_at: new Date().toISOString(),
    result: summarizeRun(report(index, failed)),
    error: failed ? { code: "destination_failed", message: "destination archive failed" } : null,
  });
}

async function fill(store: UploadStore, from: number, count: number): Promise<void> {
  let next = from;
  const end = from + count;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < end) await finishOne(store, next++);
    }),
  );
}

describe.each(stores)("%s store", (_name, open) => {
  it(`keeps 10 000 finished runs in under ${HEAP_BOUND_MIB} MiB of heap, and max_runs bounds the count`, {
    timeout: 600_000,
  }, async () => {
    let { store, restart } = await open(LIMITS);
    const before = heapUsed();
    await fill(store, 0, RUNS);
    await store.expire(new Date());
    expect(await store.size()).toBe(RUNS);
    const growth = heapUsed() - before;
    expect(growth, `heap grew ${(growth / 1048576).toFixed(1)} MiB`).toBeLessThan(
      HEAP_BOUND_MIB * 1024 * 1024,
    );

    // The records kept are the wire records, summaries and all.
    const page = await store.listRuns({ tokenId: "reporter", limit: 3 });
    for (const run of page.runs) expect(v.safeParse(RunRecordSchema, run).success).toBe(true);
    const newest = page.runs[0];
    expect(newest?.result?.actions.map((action) => action.outputs)).toEqual([
      OUTPUTS_PER_ACTION,
      OUTPUTS_PER_ACTION,
    ]);

    // More finished runs than max_runs: the oldest go, the count stays.
    const oldest = (await store.listRuns({ tokenId: "reporter", limit: RUNS })).runs.at(-1);
    await fill(store, RUNS, 500);
    await store.expire(new Date());
    expect(await store.size()).toBe(RUNS);
    expect(await store.getRun(oldest?.run_id ?? "")).toBeUndefined();
    expect(heapUsed() - before).toBeLessThan(HEAP_BOUND_MIB * 1024 * 1024);

    // A restart reads every record back from disk: the store it opens keeps the same bound.
    if (restart !== undefined) {
      store = await restart();
      expect(await store.recover()).toEqual([]);
      expect(await store.size()).toBe(RUNS);
      const reopened = heapUsed() - before;
      expect(reopened, `heap grew ${(reopened / 1048576).toFixed(1)} MiB`).toBeLessThan(
        HEAP_BOUND_MIB * 1024 * 1024,
      );
    }
  });
});
