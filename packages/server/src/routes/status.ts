import type { IncomingMessage, ServerResponse } from "node:http";
import { parseDuration } from "@distributor/publish";
import type { UploadRunStatus } from "@distributor/upload-store";
import { authorize } from "../auth.js";
import type { RequestLog, ServerContext } from "../context.js";
import { HttpError, sendJson } from "../http-error.js";
import { queryOf } from "../request.js";
import type { ResolvedToken } from "../token.js";

/** Longest `?wait=` a status request may hold the connection. */
export const MAX_STATUS_WAIT_MS = 60_000;

/** `GET /runs/{id}?wait=`: the token's run, held until it has finished or the wait is over. */
export async function status(
  ctx: ServerContext,
  request: IncomingMessage,
  response: ServerResponse,
  runId: string,
  log: RequestLog,
) {
  const token = authorize(ctx.tokens, request, log);
  const { store, stopping } = ctx;
  const wait = waitParameter(queryOf(request.url));
  let record = await ownRun(ctx, token, runId, log);
  // Long-poll: answer once the run has finished, or when the wait is over.
  const deadline = Date.now() + wait;
  while (!finished(record.status) && Date.now() < deadline && !stopping.signal.aborted) {
    await store.watchRun(runId, deadline - Date.now(), stopping.signal);
    record = await ownRun(ctx, token, runId, log);
  }
  sendJson(response, 200, record);
}

/** The token's own run; another token's run is as unknown as a missing one. */
export async function ownRun(
  ctx: ServerContext,
  token: ResolvedToken,
  runId: string,
  log: RequestLog,
) {
  const stored = await ctx.store.getRun(runId);
  if (stored === undefined || stored.tokenId !== token.id) {
    throw new HttpError(404, "run_not_found", `run ${JSON.stringify(runId)} not found`);
  }
  log.run_id = runId;
  log.pipeline_id = stored.record.pipeline_id;
  return stored.record;
}

/** Whether the run has ended, either way. */
export function finished(status: UploadRunStatus): boolean {
  return status === "succeeded" || status === "failed";
}

/** `?wait=30s` (Go duration) in milliseconds, at most `MAX_STATUS_WAIT_MS`; 0 when absent. */
function waitParameter(query: URLSearchParams): number {
  const text = query.get("wait");
  if (text === null) return 0;
  let ms: number;
  try {
    ms = parseDuration(text);
  } catch {
    ms = Number.NaN;
  }
  if (!Number.isFinite(ms) || ms < 0) {
    throw new HttpError(
      400,
      "bad_request",
      `wait must be a duration such as 30s, got ${JSON.stringify(text)}`,
    );
  }
  return Math.min(ms, MAX_STATUS_WAIT_MS);
}
