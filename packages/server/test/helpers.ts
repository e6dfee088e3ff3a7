import { mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { request as httpRequest, type IncomingHttpHeaders } from "node:http";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { buildManifest, fileDigest, serializeManifest } from "@distributor/bundle";
import { type RawEntry, rawTar } from "@distributor/bundle/testing";
import type { BackendRegistry, Config } from "@distributor/publish";
import { parseConfig } from "@distributor/publish";
import { createLocalBackend, type StorageBackend } from "@distributor/storage";
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
import { c as createTar } from "tar";
import {
  createUploadServer,
  type UploadServer,
  type UploadServerEvent,
  type UploadServerOptions,
} from "../src/index.js";

export const TOKEN = "s3cret-reporter-token";
export const OTHER_TOKEN = "s3cret-other-token";
export const TOKEN_ENV = { REPORTER_TOKEN: TOKEN, OTHER_TOKEN };

/** A temporary workspace: `root` holds staging/, destinations and bundles. */
export async function workspace(): Promise<{ root: string; remove: () => Promise<void> }> {
  const root = await mkdtemp(join(tmpdir(), "distributor-server-"));
  return { root, remove: () => rm(root, { recursive: true, force: true }) };
}

/** A configuration with upload pipelines `reports` (and `other`), destinations below `root`. */
export function uploadConfig(root: string, extra = ""): Config {
  return parseConfig(
    `server:
  http:
    listen: 127.0.0.1:0
    retention: 1h
    queue_size: 8
    workers: 2
    staging_directory: ${join(root, "staging")}
upload_tokens:
  - id: reporter
    token_env: REPORTER_TOKEN
    allow_pipelines: [reports]
  - id: other
    token_env: OTHER_TOKEN
    allow_pipelines: [other]
pipelines:
  - id: reports
    source: {backend: http_upload, max_upload_size: 64KiB}
    destinations:
      - id: site
        backend: local
        path: ${join(root, "site")}
  - id: other
    source: {backend: http_upload}
    destinations:
      - id: site
        backend: local
        path: ${join(root, "other-site")}
${extra}`,
    { sourceName: "test.yml" },
  );
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

/** Writes a valid bundle (manifest included) of `files` into `directory`. */
export async function writeBundle(
  directory: string,
  id: string,
  files: Record<string, string>,
  created = "2026-06-04T11:55:00Z",
): Promise<void> {
  for (const [path, content] of Object.entries(files)) {
    await mkdir(dirname(join(directory, path)), { recursive: true });
    await writeFile(join(directory, path), content);
  }
  const manifest = buildManifest({
    id,
    created: new Date(created),
    files: Object.entries(files).map(([path, content]) => ({ path, ...fileDigest(content) })),
  });
  await writeFile(join(directory, "manifest.json"), serializeManifest(manifest));
}

/** Packs the contents of `directory` with tar's own packer (gzip by default). */
export async function packDirectory(directory: string, gzip = true): Promise<Buffer> {
  const names = await readdir(directory);
  const chunks: Buffer[] = [];
  for await (const chunk of createTar({ gzip, cwd: directory, portable: true }, names.sort())) {
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/** A bundle of `files` packed as a gzip tar, written and packed below `root`. */
export async function bundleArchive(
  root: string,
  id: string,
  files: Record<string, string>,
  created?: string,
): Promise<Buffer> {
  const directory = await mkdtemp(join(root, "bundle-"));
  await writeBundle(directory, id, files, created);
  const archive = await packDirectory(directory);
  await rm(directory, { recursive: true, force: true });
  return archive;
}

// Hand-built archives come from the bundle package's test helper, which its extractor tests share.
export { type RawEntry, rawTar };

/** The entries of a valid one-file bundle, for raw archives that add a bad entry to it. */
export function validEntries(id = "reports.raw"): RawEntry[] {
  const content = "# Report\nSunny.\n";
  const manifest = buildManifest({
    id,
    created: new Date("2026-06-04T11:55:00Z"),
    files: [{ path: "report.md", ...fileDigest(content) }],
  });
  return [
    { path: "manifest.json", body: serializeManifest(manifest) },
    { path: "report.md", body: content },
  ];
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

/**
 * Waits until `directory` holds nothing: a finished run's record is written before its staged
 * bundle is removed (so a crash never leaves a live run without its bundle).
 */
export async function emptied(directory: string, timeoutMs = 5_000): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const entries = await tree(directory);
    if (entries.length === 0 || Date.now() > deadline) return entries;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A tree of the workspace without the embedded store beside the staging directory. */
export function withoutStore(entries: string[]): string[] {
  return entries.filter((entry) => !entry.startsWith("staging.store"));
}

/**
 * Streams a body with node:http that is never ended by the client, resolving with the response
 * and how many bytes had been sent when it arrived.
 */
export function streamUntilAnswered(
  url: string,
  path: string,
  headers: Record<string, string>,
  chunk: Buffer,
  limitBytes: number,
): Promise<{ status: number; headers: IncomingHttpHeaders; body: string; sent: number }> {
  return new Promise((resolve, reject) => {
    let sent = 0;
    let answered = false;
    const request = httpRequest(`${url}${path}`, { method: "POST", headers }, (response) => {
      answered = true;
      let body = "";
      response.setEncoding("utf8");
      response.on("data", (text: string) => {
        body += text;
      });
      response.on("end", () => {
        request.destroy();
        try {
          checkWire("POST", path, response.statusCode ?? 0, JSON.parse(body));
        } catch (error) {
          reject(error);
          return;
        }
        resolve({ status: response.statusCode ?? 0, headers: response.headers, body, sent });
      });
    });
    request.on("error", (error) => {
      if (!answered) reject(error);
    });
    const pump = () => {
      while (!answered && sent < limitBytes) {
        sent += chunk.length;
        if (!request.write(chunk)) {
          request.once("drain", pump);
          return;
        }
      }
      if (!answered && sent >= limitBytes) reject(new Error(`no answer after ${sent} bytes`));
    };
    pump();
  });
}

/**
 * A registry whose local backend for `path` is wrapped: `writeFile` fails, or waits for `gate`
 * (each call for which `gateWhen`, when given, says so).
 */
export function faultyBackends(
  path: string,
  fault: { fail?: Error; gate?: Promise<void>; gateWhen?: () => boolean },
): BackendRegistry {
  return {
    local: async (location) => {
      const backend = createLocalBackend({ root: location.path });
      if (location.path !== path) return backend;
      return new Proxy(backend, {
        get(target, property, receiver) {
          const value = Reflect.get(target, property, receiver);
          if (typeof value !== "function") return value;
          // The backend keeps private fields: its methods must run on the backend itself.
          if (property !== "writeFile") return value.bind(target);
          return async (...args: unknown[]) => {
            if (fault.gate && (fault.gateWhen?.() ?? true)) await fault.gate;
            if (fault.fail) throw fault.fail;
            return (value as (...a: unknown[]) => unknown).apply(target, args);
          };
        },
      }) as StorageBackend;
    },
  };
}
