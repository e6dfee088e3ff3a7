import type { IncomingMessage, ServerResponse } from "node:http";
import { authorize } from "../auth.js";
import type { RequestLog, ServerContext } from "../context.js";
import { HttpError, sendJson } from "../http-error.js";
import { finished, ownRun } from "./status.js";

/**
 * `POST /runs/{id}/cancel`: a queued run is recorded failed (`cancelled`) at once (200); a
 * running one is asked to stop at its next safe point (202) and is recorded failed when it has.
 */
export async function cancel(
  ctx: ServerContext,
  request: IncomingMessage,
  response: ServerResponse,
  runId: string,
  log: RequestLog,
) {
  const token = authorize(ctx.tokens, request, log);
  const { store, stagingArea, workers, metrics, runControls, cancelRequests, now, emit } = ctx;
  const record = await ownRun(ctx, token, runId, log);
  if (finished(record.status)) {
    throw new HttpError(409, "run_finished", `run ${runId} has already ${record.status}`);
  }
  const reason = `cancelled by token ${token.id}`;
  const queued = await store.dequeue(runId);
  if (queued !== undefined) {
    await store.updateRun(runId, {
      status: "failed",
      finished_at: now().toISOString(),
      error: { code: "cancelled", message: `${reason} before it started` },
    });
    const stored = await store.getRun(runId);
    await stagingArea.remove(queued);
    workers.pump();
    metrics.runFinished(record.pipeline_id, "cancelled", 0);
    emit({
      type: "run",
      run_id: runId,
      pipeline_id: record.pipeline_id,
      status: "failed",
      started_at: null,
      finished_at: stored?.record.finished_at ?? now().toISOString(),
      duration_ms: 0,
      error: { code: "cancelled", message: `${reason} before it started` },
    });
    sendJson(response, 200, stored?.record ?? record);
    return;
  }
  const control = runControls.get(runId);
  if (control !== undefined) control.abort(new Error(reason));
  else {
    cancelRequests.add(runId);
    // It may be running on another instance: that one stops it at its next safe point.
    await store.requestCancel?.(runId, reason);
  }
  emit({
    type: "run_state",
    run_id: runId,
    pipeline_id: record.pipeline_id,
    state: "cancel_requested",
  });
  sendJson(response, 202, { ...record, cancel_requested: true });
}
