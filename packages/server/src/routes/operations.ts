import type { IncomingMessage, ServerResponse } from "node:http";
import { authorize } from "../auth.js";
import type { RequestLog, ServerContext } from "../context.js";
import { sendJson } from "../http-error.js";
import { readiness } from "../readiness.js";

/**
 * `GET /healthz`: the process answers. Nothing else is checked, the store least of all: a
 * liveness probe that failed while the database is away would restart every instance for it.
 */
export function healthz(response: ServerResponse) {
  sendJson(response, 200, { ok: true });
}

/** `GET /readyz`: the store and the staging area answer, and the server is not shutting down. */
export async function readyz(ctx: ServerContext, response: ServerResponse) {
  const { store, stagingArea } = ctx;
  const checks = await readiness(store, stagingArea);
  if (ctx.closing !== undefined) checks.shutdown = "the server is shutting down";
  const ready = Object.values(checks).every((check) => check === "ok");
  response.writeHead(ready ? 200 : 503, { "Content-Type": "application/json" });
  response.end(`${JSON.stringify({ ready, checks })}\n`);
}

/** `GET /metrics`, in the Prometheus text format. */
export async function metricsText(
  ctx: ServerContext,
  request: IncomingMessage,
  response: ServerResponse,
  log: RequestLog,
) {
  const { config, metrics } = ctx;
  // Any upload token may read them, unless the operator made them public.
  if (!config.server.metrics.public) log.token_id = authorize(ctx.tokens, request, log).id;
  const text = await metrics.registry.metrics();
  response.writeHead(200, { "Content-Type": metrics.registry.contentType });
  response.end(text);
}
