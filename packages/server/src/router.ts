import type { IncomingMessage, ServerResponse } from "node:http";
import { errorMessage } from "@distributor/publish";
import { storeUnavailable } from "@distributor/upload-store";
import type { RequestLog, ServerContext } from "./context.js";
import { RETRY_AFTER_SECONDS } from "./context.js";
import { errorBody, HttpError, sendBeforeBody, sendJson } from "./http-error.js";
import { allow, decodeSegment, pathOf } from "./request.js";
import { speaksTus } from "./resumable/tus.js";
import { cancel } from "./routes/cancel.js";
import { list } from "./routes/list.js";
import { healthz, metricsText, readyz } from "./routes/operations.js";
import {
  createUpload,
  headUpload,
  patchUpload,
  terminateUpload,
  tusOptions,
} from "./routes/resumable.js";
import { status } from "./routes/status.js";
import { upload } from "./routes/upload.js";

/** Handles one request: refusals become error bodies, and every request is logged and counted. */
export async function handle(
  ctx: ServerContext,
  request: IncomingMessage,
  response: ServerResponse,
): Promise<void> {
  const { metrics, emit } = ctx;
  const started = Date.now();
  const log = {
    method: request.method ?? "GET",
    path: pathOf(request.url),
    token_id: null as string | null,
    pipeline_id: null as string | null,
    run_id: null as string | null,
    error_code: null as string | null,
    replayed: false,
    received_bytes: 0,
    counts_upload: false,
  };
  try {
    await route(ctx, request, response, log);
  } catch (error) {
    const refusal = refusalOf(error);
    log.error_code = refusal.code;
    if (!response.headersSent) {
      const body = errorBody(refusal.code, refusal.message);
      if (request.complete) sendJson(response, refusal.status, body, refusal.headers);
      else sendBeforeBody(request, response, refusal.status, body, refusal.headers);
    } else {
      response.destroy();
    }
  } finally {
    emit({
      type: "request",
      ...log,
      status: response.statusCode,
      duration_ms: Date.now() - started,
    });
    if (log.counts_upload && log.pipeline_id !== null) {
      const accepted = response.statusCode === 202 || response.statusCode === 200;
      const outcome = log.replayed
        ? "replayed"
        : accepted
          ? "accepted"
          : (log.error_code ?? `http_${response.statusCode}`);
      metrics.upload(log.pipeline_id, outcome, (Date.now() - started) / 1000);
      if (accepted && !log.replayed) metrics.received(log.pipeline_id, log.received_bytes);
    }
  }
}

/**
 * The answer to a request that failed: its own refusal; `503 store_unavailable` with
 * `Retry-After` when the store cannot be reached or is blocked for now (a producer's retry with
 * the same key succeeds once it is back); `500` for anything else, a fault no retry mends.
 */
function refusalOf(error: unknown): HttpError {
  if (error instanceof HttpError) return error;
  const unavailable = storeUnavailable(error);
  if (unavailable !== undefined) {
    return new HttpError(
      503,
      "store_unavailable",
      `the upload store is unavailable; retry later: ${unavailable.message}`,
      { headers: { "Retry-After": RETRY_AFTER_SECONDS }, cause: error },
    );
  }
  return new HttpError(500, "internal_error", `internal error: ${errorMessage(error)}`);
}

async function route(
  ctx: ServerContext,
  request: IncomingMessage,
  response: ServerResponse,
  log: RequestLog,
) {
  const segments = pathOf(request.url).split("/").slice(1);
  const method = request.method ?? "GET";
  if (segments.length === 1 && segments[0] === "healthz") {
    allow(method, "GET");
    healthz(response);
    return;
  }
  if (segments.length === 1 && segments[0] === "readyz") {
    allow(method, "GET");
    await readyz(ctx, response);
    return;
  }
  if (segments.length === 1 && segments[0] === "metrics") {
    allow(method, "GET");
    await metricsText(ctx, request, response, log);
    return;
  }
  // The probes and the metrics answered above need no store call (a store that is away is what
  // they must report, not fail on); what follows reads or writes runs.
  if (ctx.closing !== undefined) {
    throw new HttpError(503, "shutting_down", "the server is shutting down", {
      headers: { "Retry-After": RETRY_AFTER_SECONDS },
    });
  }
  await ctx.store.expire(ctx.now());
  if (segments.length === 3 && segments[0] === "pipelines" && segments[2] === "uploads") {
    const pipelineId = decodeSegment(segments[1] ?? "");
    if (method === "OPTIONS") return tusOptions(response);
    allow(method, "POST");
    if (speaksTus(request)) await createUpload(ctx, request, response, pipelineId, log);
    else {
      log.counts_upload = true;
      await upload(ctx, request, response, pipelineId, log);
    }
    return;
  }
  if (segments.length === 4 && segments[0] === "pipelines" && segments[2] === "uploads") {
    const pipelineId = decodeSegment(segments[1] ?? "");
    const id = decodeSegment(segments[3] ?? "");
    if (method === "OPTIONS") return tusOptions(response);
    if (method === "HEAD") return headUpload(ctx, request, response, pipelineId, id, log);
    if (method === "DELETE") return terminateUpload(ctx, request, response, pipelineId, id, log);
    allow(method, "PATCH");
    await patchUpload(ctx, request, response, pipelineId, id, log);
    return;
  }
  if (segments.length === 1 && segments[0] === "runs") {
    allow(method, "GET");
    await list(ctx, request, response, log);
    return;
  }
  if (segments.length === 2 && segments[0] === "runs") {
    allow(method, "GET");
    await status(ctx, request, response, decodeSegment(segments[1] ?? ""), log);
    return;
  }
  if (segments.length === 3 && segments[0] === "runs" && segments[2] === "cancel") {
    allow(method, "POST");
    await cancel(ctx, request, response, decodeSegment(segments[1] ?? ""), log);
    return;
  }
  throw new HttpError(404, "not_found", `no such endpoint: ${method} ${pathOf(request.url)}`);
}
