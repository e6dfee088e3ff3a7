import type { UploadStore } from "@distributor/upload-store";
import { POLL_MS, type StoreContext } from "./context.js";

/** Versions of runs this process last read, so a long-poll starts from what the caller saw. */
const SEEN_VERSIONS = 1_000;

export interface RunWatch extends Pick<UploadStore, "watchRun"> {
  /** Notes the version of a run just read. */
  remember(runId: string, version: number): void;
  /** Wakes the long-polls of a run this process changed. */
  notify(runId: string): void;
  /** Stops looking for changes (the store closes). */
  stop(): void;
}

/**
 * Long-polls: each watched run's waiters, with the version each waits to see change; another
 * instance's change is seen by polling the versions of the watched runs.
 */
export function createRunWatch(ctx: StoreContext): RunWatch {
  const { db, s } = ctx;
  const { pool } = db;
  const watchers = new Map<string, Map<() => void, number | undefined>>();
  let looking: NodeJS.Timeout | undefined;
  const seen = new Map<string, number>();
  const remember = (runId: string, version: number) => {
    seen.delete(runId);
    seen.set(runId, version);
    if (seen.size > SEEN_VERSIONS) seen.delete(seen.keys().next().value as string);
  };
  const notify = (runId: string) => {
    const waiting = watchers.get(runId);
    if (waiting === undefined) return;
    watchers.delete(runId);
    for (const wake of [...waiting.keys()]) wake();
  };
  /**
   * Another instance's change arrives only through the table: one query per poll reads the
   * version of every watched run and wakes the waiters of those that changed (or went).
   */
  const lookForChanges = async () => {
    looking = undefined;
    const runIds = [...watchers.keys()];
    if (runIds.length === 0 || ctx.isClosed()) return;
    try {
      const result = await pool.query<{ run_id: string; version: string }>(
        `SELECT run_id, version FROM ${s}.upload_runs WHERE run_id = ANY($1::text[])`,
        [runIds],
      );
      const versions = new Map(result.rows.map((row) => [row.run_id, Number(row.version)]));
      for (const runId of runIds) {
        const version = versions.get(runId) ?? -1;
        for (const [wake, baseline] of [...(watchers.get(runId) ?? [])]) {
          if (baseline === undefined) watchers.get(runId)?.set(wake, version);
          else if (baseline !== version) wake();
        }
      }
    } catch {
      // The next look, or each waiter's timeout, ends the wait.
    }
    scheduleLook();
  };
  const scheduleLook = () => {
    if (looking !== undefined || watchers.size === 0 || ctx.isClosed()) return;
    looking = setTimeout(() => void lookForChanges(), POLL_MS);
    looking.unref();
  };

  return {
    remember,
    notify,
    stop: () => clearTimeout(looking),

    watchRun(runId, timeoutMs, signal) {
      return new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          signal?.removeEventListener("abort", done);
          const waiting = watchers.get(runId);
          waiting?.delete(done);
          if (waiting?.size === 0) watchers.delete(runId);
          resolve();
        };
        const timer = setTimeout(done, timeoutMs);
        signal?.addEventListener("abort", done, { once: true });
        let waiting = watchers.get(runId);
        if (waiting === undefined) {
          waiting = new Map();
          watchers.set(runId, waiting);
        }
        // From the version this process last read: a change since the caller's read counts.
        waiting.set(done, seen.get(runId));
        scheduleLook();
      });
    },
  };
}
