import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Config } from "@distributor/publish";
import {
  AcceptedBodySchema,
  CancelAnswerSchema,
  ErrorBodySchema,
  HealthBodySchema,
  parseWire,
  RunPageSchema,
  RunRecordSchema,
  type WireSchema,
} from "@distributor/upload-store/wire";
import type { UploadServerEvent } from "../events.js";
import { createUploadServer, type UploadServer } from "../server.js";
import type { UploadServerOptions } from "../server-options.js";

// A real upload server on 127.0.0.1:0 and the requests a producer makes to it, every answer
// checked against the wire record the client parses with.

export const TOKEN = "s3cret-reporter-token";
export const OTHER_TOKEN = "s3cret-other-token";
export const TOKEN_ENV = { REPORTER_TOKEN: TOKEN, OTHER_TOKEN };

/** A temporary workspace: `root` holds staging/, destinations and bundles. */
export async function workspace(): Promise<{ root: string; remove: () => Promise<void> }> {
  const root = await mkdtemp(join(tmpdir(), "distributor-server-"));
  return { root, remove: () => rm(root, { recursive: true, force: true }) };
}

export interface Running {
  server: UploadServer;
  url: string;
  events: UploadServerEvent[];
}

export async function startServer(
  config: Config,
  options: Partial<UploadServerOptions> = {},
): Promise<Running> {
  const events: UploadServerEvent[] = [];
  const server = await createUploadServer({
    config,
    env: TOKEN_ENV,
    onEvent: (event) => events.push(event),
    ...options,
  });
  const address = await server.listen("127.0.0.1:0");
  return { server, url: address.url, events };
}

export interface UploadOptions {
  token?: string | null;
  key?: string;
  contentType?: string;
  pipeline?: string;
}

/** `POST /pipelines/{id}/uploads` with `fetch`. */
export async function upload(
  url: string,
  body: Buffer,
  options: UploadOptions = {},
): Promise<{ status: number; headers: Headers; json: Record<string, unknown> }> {
  const headers: Record<string, string> = {
    "Content-Type": options.contentType ?? "application/gzip",
  };
  if (options.token !== null) headers.Authorization = `Bearer ${options.token ?? TOKEN}`;
  if (options.key !== undefined) headers["Idempotency-Key"] = options.key;
  const response = await fetch(`${url}/pipelines/${options.pipeline ?? "reports"}/uploads`, {
    method: "POST",
    headers,
    body: new Uint8Array(body),
  });
  const json = (await response.json()) as Record<string, unknown>;
  checkWire("POST", "/pipelines/-/uploads", response.status, json);
  return { status: response.status, headers: response.headers, json };
}

/** The wire schema (`@distributor/upload-store/wire`) of the answer to `method path` with `status`. */
export function wireSchemaOf(method: string, path: string, status: number): WireSchema {
  const route = new URL(path, "http://server").pathname;
  if (status >= 400) return ErrorBodySchema;
  if (route === "/healthz") return HealthBodySchema;
  if (method === "POST" && /^\/pipelines\/[^/]+\/uploads$/.test(route)) return AcceptedBodySchema;
  if (method === "POST" && /^\/runs\/[^/]+\/cancel$/.test(route)) return CancelAnswerSchema;
  if (route === "/runs") return RunPageSchema;
  if (/^\/runs\/[^/]+$/.test(route)) return RunRecordSchema;
  throw new Error(`no wire schema for ${method} ${path} ${status}`);
}

/**
 * Fails unless `body` is the wire record the upload API promises for that answer: every answer a
 * test reads through these helpers is checked against the schema the client parses with.
 */
export function checkWire(method: string, path: string, status: number, body: unknown): void {
  const parsed = parseWire(wireSchemaOf(method, path, status), body);
  if (!parsed.ok) {
    throw new Error(
      `${method} ${path} answered ${status} with a body that is not its wire record: ${parsed.problem}: ${JSON.stringify(body)}`,
    );
  }
}

export async function getJson(
  url: string,
  path: string,
  token: string | null = TOKEN,
): Promise<{ status: number; headers: Headers; json: Record<string, unknown> }> {
  const response = await fetch(`${url}${path}`, {
    headers: token === null ? {} : { Authorization: `Bearer ${token}` },
  });
  const json = (await response.json()) as Record<string, unknown>;
  checkWire("GET", path, response.status, json);
  return { status: response.status, headers: response.headers, json };
}

/** Polls a run until it has finished. */
export async function waitForRun(
  url: string,
  runId: string,
  token = TOKEN,
  timeoutMs = 15_000,
): Promise<Record<string, unknown>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { json } = await getJson(url, `/runs/${runId}`, token);
    if (json.status === "succeeded" || json.status === "failed") return json;
    if (Date.now() > deadline) throw new Error(`run ${runId} still ${String(json.status)}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** Everything below `directory`, recursively, sorted (empty when it does not exist). */
export async function tree(directory: string): Promise<string[]> {
  try {
    return (await readdir(directory, { recursive: true })).map(String).sort();
  } catch {
    return [];
  }
}
