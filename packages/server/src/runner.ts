import { randomUUID } from "node:crypto";
import { setMaxListeners } from "node:events";
import type { Config, PipelineConfig } from "@distributor/publish";
import {
  errorCode,
  errorMessage,
  pipelineConfigDigest,
  type RunReport,
  run,
  runSucceeded,
  WorkflowError,
} from "@distributor/publish";
import type { StorageBackend } from "@distributor/storage";
import type {
  AcceptedUpload,
  IdempotencyScope,
  ManifestIdentity,
  UploadJob,
  UploadRunRecord,
} from "@distributor/upload-store";
import type { ServerContext } from "./context.js";
import { summarizeRun } from "./summary.js";
import type { ResolvedToken } from "./token.js";

const DEFAULT_LOCK_TIMEOUT_MS = 10 * 60 * 1000;
/** How long a local store's failing write of a finished run's record is tried again. */
const FINAL_RECORD_RETRY_MS = 2 * 60 * 1000;

/** Records an accepted upload's run and queues its job, with its idempotency key if any. */
export async function enqueue(
  ctx: ServerContext,
  token: ResolvedToken,
  pipeline: PipelineConfig,
  manifest: ManifestIdentity,
  staged: Pick<UploadJob, "stagingDirectory" | "bundleDirectory" | "stagedBytes">,
  scope: IdempotencyScope | undefined,
): Promise<AcceptedUpload> {
  const { store, now, emit } = ctx;
  const runId = randomUUID();
  const record: UploadRunRecord = {
    run_id: runId,
    pipeline_id: pipeline.id,
    status: "queued",
    accepted_at: now().toISOString(),
    started_at: null,
    finished_at: null,
    manifest,
    result: null,
    error: null,
  };
  const accepted: AcceptedUpload = {
    run_id: runId,
    pipeline_id: pipeline.id,
    status: record.status,
    manifest,
    status_url: `/runs/${encodeURIComponent(runId)}`,
  };
  const job: UploadJob = {
    runId,
    pipelineId: pipeline.id,
    stagingDirectory: staged.stagingDirectory,
    bundleDirectory: staged.bundleDirectory,
    configDigest: pipelineConfigDigest(pipeline),
    ...(staged.stagedBytes === undefined ? {} : { stagedBytes: staged.stagedBytes }),
  };
  await store.enqueue({ record, tokenId: token.id }, job, accepted, scope);
  emit({ type: "run_state", run_id: runId, pipeline_id: pipeline.id, state: "queued" });
  return accepted;
}

/** Runs one queued job and records how it ended; called by the workers. */
export async function executeRun(ctx: ServerContext, job: UploadJob): Promise<void> {
  const { options, config, store, stagingArea, metrics, runControls, cancelRequests, now, emit } =
    ctx;
  const control = new AbortController();
  // Many requests of the run listen on it at once; each removes its listener when it ends.
  setMaxListeners(0, control.signal);
  runControls.set(job.runId, control);
  if (cancelRequests.delete(job.runId)) {
    control.abort(new Error("cancelled before it started"));
  }
  const startedAt = now();
  const started = Date.now();
  let report: RunReport | null = null;
  let error: { code: string; message: string } | null = null;
  // The staged bundle directory is the source root, whether the archive held the bundle at its
  // root or in a single top-level directory: that directory's name is the producer's and never
  // becomes part of a destination path (docs/integrations/http-upload.md, docs/operations.md); path_mapping alone decides.
  let source: StorageBackend | undefined;
  try {
    const claimed = await store.updateRun(job.runId, {
      status: "running",
      started_at: startedAt.toISOString(),
    });
    if (!claimed) {
      // Another instance took this run over while this one stalled (a shared store): it is
      // that instance's now, with its staged bundle. Nothing here runs, records or removes.
      emit({
        type: "warning",
        message: `run ${job.runId}: taken over by another instance before it started here; left to it`,
      });
      metrics.runFinished(job.pipelineId, "taken_over", 0);
      emit({
        type: "run_state",
        run_id: job.runId,
        pipeline_id: job.pipelineId,
        state: "taken_over",
      });
      return;
    }
    if (job.takenOver === true) {
      metrics.takeover();
      emit({ type: "run_state", run_id: job.runId, pipeline_id: job.pipelineId, state: "resumed" });
    }
    emit({ type: "run_state", run_id: job.runId, pipeline_id: job.pipelineId, state: "started" });
    control.signal.throwIfAborted();
    refuseChangedPipeline(config, job);
    source = await stagingArea.openSource(job, control.signal);
    report = await run({
      config,
      pipelineIds: [job.pipelineId],
      sources: { [job.pipelineId]: source },
      lockTimeoutMs: options.lockTimeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS,
      signal: control.signal,
      ...(options.backends ? { backends: options.backends } : {}),
      ...(options.now ? { now: options.now } : {}),
      ...(options.distributorVersion ? { distributorVersion: options.distributorVersion } : {}),
    });
    if (!runSucceeded(report)) error = runFailure(report);
  } catch (failure) {
    error = { code: errorCode(failure), message: errorMessage(failure) };
  } finally {
    runControls.delete(job.runId);
    await source?.close().catch(() => undefined);
  }
  if (control.signal.aborted) {
    error = { code: "cancelled", message: errorMessage(control.signal.reason) };
  }
  const finishedAt = now();
  const status = error === null ? "succeeded" : "failed";
  // The record first: a crash before the staged bundle is removed leaves only orphaned data,
  // which the next start removes, never a live run without its bundle.
  const recorded = await recordFinished(ctx, job.runId, {
    status,
    finished_at: finishedAt.toISOString(),
    result: report === null ? null : summarizeRun(report),
    error,
  });
  if (!recorded) {
    // Taken over while it ran (this instance's claim lapsed): the record is the new holder's,
    // and so is the staged bundle it is reading; the commit protocol's lease kept the two runs
    // from writing one destination at once. What this attempt came to is not the run's outcome
    // (it fails once the new holder removed the staged bundle): it is counted and logged as
    // taken over, never as a failed run, which the holder may well have published.
    const ended = error === null ? "succeeded" : `${error.code}: ${error.message}`;
    emit({
      type: "warning",
      message: `run ${job.runId}: taken over by another instance while it ran here (this attempt ended ${ended}); its record and staged bundle are left to it`,
    });
    metrics.runFinished(job.pipelineId, "taken_over", (Date.now() - started) / 1000);
    emit({
      type: "run_state",
      run_id: job.runId,
      pipeline_id: job.pipelineId,
      state: "taken_over",
    });
    return;
  }
  metrics.runFinished(
    job.pipelineId,
    error?.code === "cancelled" ? "cancelled" : status,
    (Date.now() - started) / 1000,
  );
  emit({
    type: "run",
    run_id: job.runId,
    pipeline_id: job.pipelineId,
    status,
    started_at: startedAt.toISOString(),
    finished_at: finishedAt.toISOString(),
    duration_ms: Date.now() - started,
    error,
  });
  await stagingArea.remove(job);
}

/**
 * Writes a finished run's record, trying again while the store is away: a shared store's run
 * left live under this instance's claim would wait for it forever, so there it keeps trying
 * (another instance takes the run over if this one's heartbeat lapses meanwhile, and this
 * change is then refused: false); a local store gives up after `FINAL_RECORD_RETRY_MS`, and
 * its next start queues the run again.
 */
export async function recordFinished(
  ctx: ServerContext,
  runId: string,
  change: Partial<UploadRunRecord>,
): Promise<boolean> {
  const { store, emit } = ctx;
  const giveUpAt = Date.now() + FINAL_RECORD_RETRY_MS;
  for (let delay = 100; ; delay = Math.min(delay * 2, 5_000)) {
    try {
      return await store.updateRun(runId, change);
    } catch (error) {
      emit({
        type: "warning",
        message: `run ${runId}: recording its end failed, trying again: ${errorMessage(error)}`,
      });
      if (store.pollIntervalMs === undefined && Date.now() >= giveUpAt) throw error;
    }
    await new Promise((resolve) => setTimeout(resolve, delay));
  }
}

/** Stops this instance's runs that were asked to stop through another instance. */
export async function stopCancelledRuns(ctx: ServerContext) {
  const { store, runControls } = ctx;
  if (runControls.size === 0 || store.cancelRequests === undefined) return;
  const asked = await store.cancelRequests([...runControls.keys()]);
  for (const [runId, reason] of asked) runControls.get(runId)?.abort(new Error(reason));
}

/** A shared store gains jobs from other instances: looks for them now and then. */
export function startPoller(ctx: ServerContext): NodeJS.Timeout | undefined {
  const { store, workers } = ctx;
  const poller =
    store.pollIntervalMs === undefined
      ? undefined
      : setInterval(() => {
          workers.pump();
          void stopCancelledRuns(ctx).catch(() => undefined);
        }, store.pollIntervalMs);
  poller?.unref();
  return poller;
}

function runFailure(report: RunReport): { code: string; message: string } {
  const pipelineError = report.pipeline_errors[0];
  if (pipelineError !== undefined) {
    return { code: pipelineError.code, message: pipelineError.message };
  }
  const failed = report.actions.filter((action) => action.status === "failed");
  const first = failed[0];
  const detail =
    first === undefined
      ? ""
      : `: destination ${first.destination_id} bundle ${first.bundle_path || "."}: ${first.error?.message ?? first.reason}`;
  return { code: "destination_failed", message: `${failed.length} destination(s) failed${detail}` };
}

/**
 * A run accepted under another configuration of its pipeline (the server restarted with a changed
 * one, or another instance of a shared store runs another) is refused before anything is read:
 * its destinations may not be the ones the producer was answered for.
 */
function refuseChangedPipeline(config: Config, job: UploadJob): void {
  if (job.configDigest === undefined) return;
  const pipeline = config.pipelines.find((p) => p.id === job.pipelineId);
  if (pipeline === undefined) {
    throw new WorkflowError(
      "config_changed",
      `pipeline ${job.pipelineId} was accepted by this server but is no longer configured; nothing was published: upload the bundle again where it is configured`,
    );
  }
  if (pipelineConfigDigest(pipeline) !== job.configDigest) {
    throw new WorkflowError(
      "config_changed",
      `pipeline ${job.pipelineId} is configured otherwise than when this upload was accepted (its source, validation or destinations changed); nothing was published: upload the bundle again`,
    );
  }
}
