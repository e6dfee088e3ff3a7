import type {
  AcceptedUpload,
  KeyClaim,
  RunPage,
  StoredRun,
  StoreLimits,
  UploadJob,
  UploadRunRecord,
  UploadRunStatus,
  UploadStore,
} from "@distributor/upload-store";

/** A run as a store persists it: acceptance order, owner, record and, while it is live, its job. */
export interface PersistedRun {
  seq: number;
  token_id: string;
  record: UploadRunRecord;
  /** The staged bundle while the run is accepted, queued or running; null once finished. */
  job: UploadJob | null;
}

/** An idempotency key bound to the upload it accepted. */
export interface PersistedKey {
  token_id: string;
  pipeline_id: string;
  key: string;
  run_id: string;
  accepted: AcceptedUpload;
  /** The job's `configDigest`: a replay answers only under the configuration that accepted it. */
  config_digest?: string;
}

/**
 * Where the shared bookkeeping writes through. Each call resolves once the change is as durable
 * as the store promises; the in-memory store's calls do nothing.
 */
export interface StorePersistence {
  readonly durable: boolean;
  /**
   * True when a change is never durable without every change asked for before it (an
   * append-only log): then dependent changes are asked for together and share a flush.
   */
  readonly ordered?: boolean;
  writeRun(run: PersistedRun): Promise<void>;
  removeRun(runId: string): Promise<void>;
  writeKey(key: PersistedKey): Promise<void>;
  removeKey(key: PersistedKey): Promise<void>;
  close(): Promise<void>;
}

type KeyEntry =
  | { kind: "pending"; settled: Promise<void>; settle: () => void }
  | { kind: "accepted"; persisted: PersistedKey };

const LIVE: ReadonlySet<UploadRunStatus> = new Set(["accepted", "queued", "running"]);

export const isLive = (status: UploadRunStatus): boolean => LIVE.has(status);

/**
 * The bookkeeping every single-process store shares: queue order, idempotency claims, expiry and
 * paging over records held in memory, writing each change through `persistence` before it takes
 * effect. `initial` is what a durable store read back at start.
 */
export function createUploadStoreCore(
  limits: StoreLimits,
  persistence: StorePersistence,
  initial: { runs: PersistedRun[]; keys: PersistedKey[] } = { runs: [], keys: [] },
): UploadStore {
  /** In acceptance order (`seq`), which expiry and paging rely on. */
  const runs = new Map<string, PersistedRun>();
  const keys = new Map<string, KeyEntry>();
  const keysByRun = new Map<string, string[]>();
  /** Run ids of queued jobs, oldest first. */
  const queue: string[] = [];
  const watchers = new Map<string, Set<() => void>>();
  /** Per-run chain, so two changes of one run are written in the order they were made. */
  const writes = new Map<string, Promise<unknown>>();
  let reserved = 0;
  let nextSeq = 1;

  const keyOf = (scope: { tokenId: string; pipelineId: string; key: string }) =>
    JSON.stringify([scope.tokenId, scope.pipelineId, scope.key]);

  for (const run of [...initial.runs].sort((a, b) => a.seq - b.seq)) {
    runs.set(run.record.run_id, run);
    if (run.job !== null && isLive(run.record.status)) queue.push(run.record.run_id);
    nextSeq = Math.max(nextSeq, run.seq + 1);
  }
  for (const persisted of initial.keys) {
    if (!runs.has(persisted.run_id)) continue;
    bindKey(persisted);
  }

  function bindKey(persisted: PersistedKey) {
    const key = keyOf({
      tokenId: persisted.token_id,
      pipelineId: persisted.pipeline_id,
      key: persisted.key,
    });
    keys.set(key, { kind: "accepted", persisted });
    keysByRun.set(persisted.run_id, [...(keysByRun.get(persisted.run_id) ?? []), key]);
  }

  function serial<T>(runId: string, change: () => Promise<T>): Promise<T> {
    const previous = writes.get(runId);
    // Started at once when nothing of this run is being written: an ordered store then has the
    // change before anything the caller asks for next.
    const next = previous === undefined ? (async () => change())() : previous.then(change, change);
    writes.set(runId, next);
    void next
      .finally(() => {
        if (writes.get(runId) === next) writes.delete(runId);
      })
      .catch(() => undefined);
    return next;
  }

  function notify(runId: string) {
    const waiting = watchers.get(runId);
    if (waiting === undefined) return;
    watchers.delete(runId);
    for (const wake of waiting) wake();
  }

  const copy = (run: PersistedRun): StoredRun => ({
    tokenId: run.token_id,
    record: { ...run.record },
  });

  async function forget(runId: string) {
    const run = runs.get(runId);
    if (run === undefined) return;
    for (const key of keysByRun.get(runId) ?? []) {
      const entry = keys.get(key);
      if (entry?.kind === "accepted") await persistence.removeKey(entry.persisted);
      keys.delete(key);
    }
    keysByRun.delete(runId);
    await persistence.removeRun(runId);
    runs.delete(runId);
    notify(runId);
  }

  return {
    durable: persistence.durable,

    async recover() {
      const jobs: UploadJob[] = [];
      for (const runId of queue) {
        const run = runs.get(runId);
        if (run?.job == null) continue;
        if (run.record.status === "running") {
          await serial(runId, async () => {
            const next: PersistedRun = {
              ...run,
              record: { ...run.record, status: "queued", started_at: null },
            };
            await persistence.writeRun(next);
            runs.set(runId, next);
          });
        }
        jobs.push(run.job);
      }
      return jobs;
    },

    async claimKey(scope): Promise<KeyClaim> {
      const key = keyOf(scope);
      const entry = keys.get(key);
      if (entry?.kind === "accepted") {
        const { accepted, config_digest } = entry.persisted;
        return config_digest === undefined
          ? { kind: "accepted", accepted }
          : { kind: "accepted", accepted, configDigest: config_digest };
      }
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
      if (queue.length + reserved >= limits.queueSize) return false;
      reserved += 1;
      return true;
    },

    async releaseQueueSlot() {
      reserved = Math.max(0, reserved - 1);
    },

    async enqueue(stored, job, accepted, scope) {
      const runId = stored.record.run_id;
      const run: PersistedRun = {
        seq: nextSeq++,
        token_id: stored.tokenId,
        record: { ...stored.record },
        job,
      };
      // The run first: a key is never bound to a run that a restart would not find.
      const runWritten = serial(runId, () => persistence.writeRun(run));
      if (scope === undefined || persistence.ordered !== true) await runWritten;
      if (scope !== undefined) {
        const persisted: PersistedKey = {
          token_id: scope.tokenId,
          pipeline_id: scope.pipelineId,
          key: scope.key,
          run_id: runId,
          accepted,
          ...(job.configDigest === undefined ? {} : { config_digest: job.configDigest }),
        };
        try {
          // In an ordered store the key's line follows the run's, and both share one flush.
          await Promise.all([runWritten, persistence.writeKey(persisted)]);
        } catch (error) {
          await persistence.removeRun(runId).catch(() => undefined);
          throw error;
        }
        const entry = keys.get(keyOf(scope));
        bindKey(persisted);
        if (entry?.kind === "pending") entry.settle();
      }
      reserved = Math.max(0, reserved - 1);
      runs.set(runId, run);
      queue.push(runId);
    },

    async takeNext(busyPipelines) {
      const index = queue.findIndex((runId) => {
        const job = runs.get(runId)?.job;
        return job != null && !busyPipelines.has(job.pipelineId);
      });
      if (index < 0) return undefined;
      const [runId] = queue.splice(index, 1);
      return runId === undefined ? undefined : (runs.get(runId)?.job ?? undefined);
    },

    async dequeue(runId) {
      const index = queue.indexOf(runId);
      if (index < 0) return undefined;
      queue.splice(index, 1);
      return runs.get(runId)?.job ?? undefined;
    },

    async queueLength() {
      return queue.length + reserved;
    },

    async stagedBytes() {
      let total = 0;
      for (const run of runs.values()) {
        if (run.job !== null && isLive(run.record.status)) total += run.job.stagedBytes ?? 0;
      }
      return total;
    },

    async getRun(runId) {
      const run = runs.get(runId);
      return run === undefined ? undefined : copy(run);
    },

    async updateRun(runId, change) {
      const recorded = await serial(runId, async () => {
        const run = runs.get(runId);
        if (run === undefined) return false;
        const record = { ...run.record, ...change };
        const next: PersistedRun = { ...run, record, job: isLive(record.status) ? run.job : null };
        await persistence.writeRun(next);
        runs.set(runId, next);
        return true;
      });
      notify(runId);
      return recorded;
    },

    watchRun(runId, timeoutMs, signal) {
      return new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          signal?.removeEventListener("abort", done);
          watchers.get(runId)?.delete(done);
          resolve();
        };
        const timer = setTimeout(done, timeoutMs);
        signal?.addEventListener("abort", done, { once: true });
        let waiting = watchers.get(runId);
        if (waiting === undefined) {
          waiting = new Set();
          watchers.set(runId, waiting);
        }
        waiting.add(done);
      });
    },

    async listRuns(query) {
      const before = query.cursor === undefined ? Number.POSITIVE_INFINITY : Number(query.cursor);
      const page: PersistedRun[] = [];
      let more = false;
      for (const run of [...runs.values()].reverse()) {
        if (run.seq >= before || run.token_id !== query.tokenId) continue;
        if (query.pipelineId !== undefined && run.record.pipeline_id !== query.pipelineId) continue;
        if (query.status !== undefined && run.record.status !== query.status) continue;
        if (page.length === query.limit) {
          more = true;
          break;
        }
        page.push(run);
      }
      const last = page.at(-1);
      const result: RunPage = {
        runs: page.map((run) => ({ ...run.record })),
        next_cursor: more && last !== undefined ? String(last.seq) : null,
      };
      return result;
    },

    async expire(now) {
      const cutoff = now.getTime() - limits.retentionMs;
      const finished: string[] = [];
      const expired: string[] = [];
      for (const [runId, run] of runs) {
        const at = run.record.finished_at;
        if (at === null || isLive(run.record.status)) continue;
        if (Date.parse(at) <= cutoff) expired.push(runId);
        else finished.push(runId);
      }
      // Beyond the count, the oldest accepted finished runs go first.
      const over = Math.max(0, finished.length - limits.maxRuns);
      for (const runId of [...expired, ...finished.slice(0, over)]) {
        await serial(runId, () => forget(runId));
      }
    },

    async size() {
      return runs.size;
    },

    async close() {
      await Promise.allSettled([...writes.values()]);
      await persistence.close();
    },
  };
}
