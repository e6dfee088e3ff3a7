import type { IncomingMessage, ServerResponse } from "node:http";
import type { UploadRunStatus } from "@distributor/upload-store";
import { RUN_STATUSES } from "@distributor/upload-store/wire";
import { authorize } from "../auth.js";
import type { RequestLog, ServerContext } from "../context.js";
import { HttpError, sendJson } from "../http-error.js";
import { queryOf } from "../request.js";

/** `GET /runs` page size when `limit` is absent, and its largest value. */
export const DEFAULT_RUN_PAGE = 50;
export const MAX_RUN_PAGE = 500;

/** `GET /runs?pipeline=&status=&limit=&cursor=`: the token's runs, newest first. */
export async function list(
  ctx: ServerContext,
  request: IncomingMessage,
  response: ServerResponse,
  log: RequestLog,
) {
  const token = authorize(ctx.tokens, request, log);
  const query = queryOf(request.url);
  const pipelineId = query.get("pipeline") ?? undefined;
  const statusFilter = query.get("status") ?? undefined;
  if (statusFilter !== undefined && !RUN_STATUSES.includes(statusFilter as UploadRunStatus)) {
    throw new HttpError(
      400,
      "bad_request",
      `status must be one of ${RUN_STATUSES.join(", ")}, got ${JSON.stringify(statusFilter)}`,
    );
  }
  const limitText = query.get("limit");
  const limit = limitText === null ? DEFAULT_RUN_PAGE : Number(limitText);
  if (!/^\d+$/.test(limitText ?? "1") || limit < 1 || limit > MAX_RUN_PAGE) {
    throw new HttpError(
      400,
      "bad_request",
      `limit must be an integer from 1 to ${MAX_RUN_PAGE}, got ${JSON.stringify(limitText)}`,
    );
  }
  const cursor = query.get("cursor") ?? undefined;
  if (cursor !== undefined && !/^\d+$/.test(cursor)) {
    throw new HttpError(400, "bad_request", `cursor ${JSON.stringify(cursor)} is not valid`);
  }
  if (pipelineId !== undefined) log.pipeline_id = pipelineId;
  const page = await ctx.store.listRuns({
    tokenId: token.id,
    limit,
    ...(pipelineId === undefined ? {} : { pipelineId }),
    ...(statusFilter === undefined ? {} : { status: statusFilter as UploadRunStatus }),
    ...(cursor === undefined ? {} : { cursor }),
  });
  sendJson(response, 200, page);
}
