import type { ServerContext } from "./context.js";
import { expirePartials } from "./resumable/expiry.js";

/**
 * docs/integrations/http-upload.md, durability: resumes every live run the store holds (a run that was running is queued
 * again), records the ones whose staged bundle is gone as failed, and removes staged data that
 * belongs to no live run. On shared staging other instances are alive: only data older than
 * `SHARED_STAGING_GRACE_MS` goes, since younger data may be an upload another instance is
 * receiving right now, before its run exists.
 */
export async function recover(ctx: ServerContext) {
  const { store, stagingArea, workers, now, emit } = ctx;
  const jobs = await store.recover();
  const live = new Set<string>();
  let lost = 0;
  for (const job of jobs) {
    if (await stagingArea.exists(job)) {
      live.add(job.stagingDirectory);
      continue;
    }
    // Another instance holds the run (it may just have finished and removed its bundle).
    if ((await store.dequeue(job.runId)) === undefined) {
      live.add(job.stagingDirectory);
      continue;
    }
    lost += 1;
    await store.updateRun(job.runId, {
      status: "failed",
      finished_at: now().toISOString(),
      error: {
        code: "staged_bundle_missing",
        message: `the staged bundle ${job.bundleDirectory} of this run was gone when the server restarted`,
      },
    });
  }
  const removed = await stagingArea.removeOrphans(live, Date.now());
  if (jobs.length > 0 || removed > 0) {
    emit({ type: "recovered", resumed: jobs.length - lost, removed_staging: removed, lost });
  }
  workers.pump();
}

/**
 * Finished records leave with the retention, and partial uploads with `partial_ttl`, even when
 * nobody asks for them.
 */
export function startSweeper(ctx: ServerContext): NodeJS.Timeout {
  const { config, store, now, metrics } = ctx;
  const http = config.server.http;
  const ttl = config.server.uploads.partialTtlMs;
  const sweeper = setInterval(
    () => {
      void store.expire(now()).catch(() => undefined);
      void expirePartials(ctx.resumable.partials, ttl).then(
        (expired) => metrics.partialExpired(expired),
        () => undefined,
      );
    },
    Math.max(1000, Math.min(http.retentionMs, ttl, 60_000)),
  );
  sweeper.unref();
  return sweeper;
}
