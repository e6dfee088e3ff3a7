import type { UploadJob, UploadStore } from "@distributor/upload-store";

/** Runs queued jobs, at most `workers` at a time and never two of one pipeline at once. */
export interface Workers {
  /** Starts queued jobs while workers are free; call after each enqueue. */
  pump(): void;
  /**
   * Resolves once nothing runs and nothing is queued (after a shutdown stopped new uploads). With
   * a shared store the queue is everyone's: no new job starts, and it resolves once nothing runs.
   */
  drained(): Promise<void>;
  running(): number;
}

export function createWorkers(options: {
  store: UploadStore;
  workers: number;
  execute: (job: UploadJob) => Promise<void>;
  /** A store call of the workers failed (the store is away); they try again at the next pump. */
  onError?: (error: unknown) => void;
}): Workers {
  const busyPipelines = new Set<string>();
  let active = 0;
  let pumping = false;
  let again = false;
  let waiters: (() => void)[] = [];
  const shared = options.store.pollIntervalMs !== undefined;
  let stopped = false;

  const settleWaiters = async () => {
    if (active > 0 || pumping) return;
    if (!shared && (await options.store.queueLength()) > 0) return;
    const done = waiters;
    waiters = [];
    for (const resolve of done) resolve();
  };

  const pump = async () => {
    if (stopped) return settleWaiters();
    if (pumping) {
      again = true;
      return;
    }
    pumping = true;
    try {
      do {
        again = false;
        while (active < options.workers && !stopped) {
          const job = await options.store.takeNext(busyPipelines);
          if (job === undefined) break;
          start(job);
        }
      } while (again);
    } finally {
      pumping = false;
    }
    await settleWaiters();
  };

  const start = (job: UploadJob) => {
    active += 1;
    busyPipelines.add(job.pipelineId);
    // `execute` records every outcome itself; nothing it throws may stop the workers.
    void options
      .execute(job)
      .catch(() => undefined)
      .finally(() => {
        active -= 1;
        busyPipelines.delete(job.pipelineId);
        safePump();
      });
  };
  // A store that is away must not stop the process: the next pump (an upload, a finished run,
  // a shared store's poll) tries again.
  const safePump = () => void pump().catch((error) => options.onError?.(error));

  return {
    pump: safePump,
    drained: () =>
      new Promise<void>((resolve) => {
        if (shared) stopped = true;
        waiters.push(resolve);
        void settleWaiters().catch((error) => options.onError?.(error));
      }),
    running: () => active,
  };
}
