import type {
  AcceptedUpload,
  IdempotencyScope,
  KeyClaim,
  StoredRun,
  UploadJob,
  UploadRunRecord,
  UploadStore,
} from "./store.js";

export interface MemoryUploadStoreOptions {
  /** `server.http.queue_size`: queued jobs and reserved places together. */
  queueSize: number;
  /** `server.http.retention` in milliseconds. */
  retentionMs: number;
}

type KeyEntry =
  | { kind: "pending"; settled: Promise<void>; settle: () => void }
  | { kind: "accepted"; accepted: AcceptedUpload };

/** The in-memory store of SPEC §10: everything is forgotten when the process exits. */
export function createMemoryUploadStore(options: MemoryUploadStoreOptions): UploadStore {
  const runs = new Map<string, StoredRun>();
  const keys = new Map<string, KeyEntry>();
  /** Keys bound to each run, so they expire with it. */
  const keysByRun = new Map<string, string[]>();
  const queue: UploadJob[] = [];
  let reserved = 0;

  const keyOf = (scope: IdempotencyScope) =>
    JSON.stringify([scope.tokenId, scope.pipelineId, scope.key]);

  return {
    async claimKey(scope): Promise<KeyClaim> {
      const key = keyOf(scope);
      const entry = keys.get(key);
      if (entry?.kind === "accepted") return { kind: "accepted", accepted: entry.accepted };
      if (entry?.kind === "pending") return { kind: "pending", settled: entry.settled };
      let settle: () => void = () => undefined;
      const settled = new Promise<void>((resolve) => {
        settle = resolve;
      });
      keys.set(key, { kind: "pending", settled, settle });
      return { kind: "claimed" };
    },
    async releaseKey(scope) {
      const key = keyOf(scope);
      const entry = keys.get(key);
      if (entry?.kind !== "pending") return;
      keys.delete(key);
      entry.settle();
    },
    async reserveQueueSlot() {
      if (queue.length + reserved >= options.queueSize) return false;
      reserved += 1;
      return true;
    },
    async releaseQueueSlot() {
      reserved = Math.max(0, reserved - 1);
    },
    async enqueue(run, job, accepted, scope) {
      reserved = Math.max(0, reserved - 1);
      runs.set(run.record.run_id, { tokenId: run.tokenId, record: { ...run.record } });
      queue.push(job);
      if (scope !== undefined) {
        const key = keyOf(scope);
        const entry = keys.get(key);
        keys.set(key, { kind: "accepted", accepted });
        keysByRun.set(run.record.run_id, [...(keysByRun.get(run.record.run_id) ?? []), key]);
        if (entry?.kind === "pending") entry.settle();
      }
    },
    async takeNext(busyPipelines) {
      const index = queue.findIndex((job) => !busyPipelines.has(job.pipelineId));
      if (index < 0) return undefined;
      return queue.splice(index, 1)[0];
    },
    async queueLength() {
      return queue.length + reserved;
    },
    async getRun(runId) {
      const run = runs.get(runId);
      return run === undefined ? undefined : { tokenId: run.tokenId, record: { ...run.record } };
    },
    async updateRun(runId, change: Partial<UploadRunRecord>) {
      const run = runs.get(runId);
      if (run !== undefined) run.record = { ...run.record, ...change };
    },
    async expire(now) {
      const cutoff = now.getTime() - options.retentionMs;
      for (const [runId, run] of runs) {
        const finished = run.record.finished_at;
        if (finished === null || Date.parse(finished) > cutoff) continue;
        runs.delete(runId);
        for (const key of keysByRun.get(runId) ?? []) keys.delete(key);
        keysByRun.delete(runId);
      }
    },
  };
}
