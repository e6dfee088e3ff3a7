import { createHash } from "node:crypto";
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";
import type { AddressInfo } from "node:net";
import { Transform, type TransformCallback, type Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGunzip } from "node:zlib";
import { Parser, type ReadEntry } from "tar";
import type { RunRecord, RunStatus } from "../wire.js";

/*
 * A small HTTP server speaking the upload protocol of docs/integrations/http-upload.md, for injecting faults the real
 * `distributor serve` does not make on demand; the client's tests against the real server are in
 * packages/publish/test/server/client.test.ts. Its answers are typed with the wire records. It really reads the streamed body: gunzips it, parses the tar
 * with `tar`, hashes every file and checks it against the manifest inside. Faults are injected
 * per request: 503 with Retry-After, connections dropped before or after the upload is accepted,
 * arbitrary refusals and malformed answers. Runs advance one status per poll.
 */

export type Fault =
  /** Reads the whole body, then answers 503 with `Retry-After` (when given). */
  | { kind: "unavailable"; retryAfter?: string }
  /** Answers `status` with the error body `{error: {code, message}}` without reading the body. */
  | { kind: "refuse"; status: number; code: string; message: string }
  /** Destroys the connection as soon as the request arrives: the client sees a reset. */
  | { kind: "drop" }
  /** Accepts and records the upload, then destroys the connection instead of answering. */
  | { kind: "drop-after-accept" }
  /** Answers `status` with `body` as it is. */
  | { kind: "raw"; status: number; body: string; contentType?: string };

export interface ReceivedEntry {
  path: string;
  type: string;
  mode: number | undefined;
  size: number;
  sha256: string;
  uid: number | undefined;
  gid: number | undefined;
  uname: string | undefined;
  gname: string | undefined;
}

/** An upload whose body the server read to the end. */
export interface ReceivedUpload {
  pipeline: string;
  headers: IncomingHttpHeaders;
  entries: ReceivedEntry[];
  /** Bytes of the (compressed) body. */
  bytes: number;
  /** The status answered (undefined when the connection was dropped instead). */
  status: number | undefined;
}

export interface ReceivedRequest {
  /** When it arrived (`Date.now()`). */
  at: number;
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
}

export interface WireServerOptions {
  /** Tokens and the pipelines each may upload to; default `{ "test-token": ["reports"] }`. */
  tokens?: Record<string, string[]>;
  /** Pipelines the server knows; default every pipeline some token allows, plus `locked`. */
  pipelines?: string[];
  /** Largest body accepted (413 beyond); default 64 MiB. */
  maxUploadBytes?: number;
}

interface Run {
  record: RunRecord;
  statuses: RunStatus[];
  polls: number;
}

interface IdempotencyRecord {
  manifestKey: string;
  body: Record<string, unknown>;
}

const ARCHIVE_TYPES = new Set(["application/x-tar", "application/gzip", "application/x-gzip"]);
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

export class WireServer {
  /** Base URL, `http://127.0.0.1:<port>`. */
  url = "";
  readonly requests: ReceivedRequest[] = [];
  readonly uploads: ReceivedUpload[] = [];
  /** Faults for the next upload requests, taken one per request in order. */
  readonly uploadFaults: Fault[] = [];
  /** Faults for the next `GET /runs/{id}` requests. */
  readonly runFaults: Fault[] = [];
  /** Statuses a new run reports, one per poll; the last one repeats. */
  runStatuses: RunStatus[] = ["queued", "running", "succeeded"];

  readonly #server: Server;
  readonly #tokens: Record<string, string[]>;
  readonly #pipelines: Set<string>;
  readonly #maxUploadBytes: number;
  readonly #runs = new Map<string, Run>();
  readonly #idempotency = new Map<string, IdempotencyRecord>();

  private constructor(options: WireServerOptions) {
    this.#tokens = options.tokens ?? { "test-token": ["reports"] };
    this.#pipelines = new Set(
      options.pipelines ?? [...Object.values(this.#tokens).flat(), "locked"],
    );
    this.#maxUploadBytes = options.maxUploadBytes ?? 64 * 1024 * 1024;
    this.#server = createServer((request, response) => {
      this.#handle(request, response).catch((error: unknown) => {
        if (!response.headersSent) {
          sendError(response, 500, "internal", `test server: ${(error as Error).message}`);
        } else response.destroy();
      });
    });
  }

  static async start(options: WireServerOptions = {}): Promise<WireServer> {
    const server = new WireServer(options);
    await new Promise<void>((resolve) => server.#server.listen(0, "127.0.0.1", resolve));
    const { port } = server.#server.address() as AddressInfo;
    server.url = `http://127.0.0.1:${port}`;
    return server;
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  /** The run the server holds, as `GET /runs/{id}` last answered it. */
  run(runId: string): Record<string, unknown> | undefined {
    return this.#runs.get(runId)?.record;
  }

  async #handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const url = new URL(request.url ?? "/", "http://test");
    this.requests.push({
      at: Date.now(),
      method: request.method ?? "",
      url: url.pathname,
      headers: request.headers,
    });
    if (request.method === "GET" && url.pathname === "/healthz") {
      sendJson(response, 200, { ok: true });
      return;
    }
    const upload = /^\/pipelines\/([^/]+)\/uploads$/.exec(url.pathname);
    if (request.method === "POST" && upload?.[1] !== undefined) {
      await this.#upload(decodeURIComponent(upload[1]), request, response);
      return;
    }
    const run = /^\/runs\/([^/]+)$/.exec(url.pathname);
    if (request.method === "GET" && run?.[1] !== undefined) {
      this.#status(decodeURIComponent(run[1]), request, response);
      return;
    }
    sendError(response, 404, "not_found", `no route for ${request.method} ${url.pathname}`);
  }

  #token(request: IncomingMessage, response: ServerResponse): string | undefined {
    const match = /^Bearer (.+)$/.exec(request.headers.authorization ?? "");
    const token = match?.[1];
    if (token === undefined || this.#tokens[token] === undefined) {
      response.setHeader("www-authenticate", "Bearer");
      sendError(response, 401, "unauthorized", "missing or invalid upload token");
      return undefined;
    }
    return token;
  }

  /** Applies an injected fault; true when it answered (or dropped) the request. */
  async #fault(
    fault: Fault | undefined,
    request: IncomingMessage,
    response: ServerResponse,
  ): Promise<boolean> {
    if (fault === undefined || fault.kind === "drop-after-accept") return false;
    switch (fault.kind) {
      case "drop":
        request.socket.destroy();
        return true;
      case "refuse":
        sendError(response, fault.status, fault.code, fault.message);
        return true;
      case "raw":
        response.writeHead(fault.status, { "content-type": fault.contentType ?? "text/html" });
        response.end(fault.body);
        return true;
      case "unavailable":
        for await (const _ of request) {
          // Read the body to its end, as a server that staged it before finding the queue full.
        }
        if (fault.retryAfter !== undefined) response.setHeader("retry-after", fault.retryAfter);
        sendError(response, 503, "queue_full", "the upload queue is full; try again later");
        return true;
    }
  }

  async #upload(pipelineId: string, request: IncomingMessage, response: ServerResponse) {
    const fault = this.uploadFaults.shift();
    if (await this.#fault(fault, request, response)) return;
    const token = this.#token(request, response);
    if (token === undefined) return;
    if (!this.#pipelines.has(pipelineId)) {
      sendError(response, 404, "pipeline_not_found", `unknown pipeline ${pipelineId}`);
      return;
    }
    if (!this.#tokens[token]?.includes(pipelineId)) {
      sendError(response, 403, "pipeline_not_allowed", `token may not upload to ${pipelineId}`);
      return;
    }
    const contentType = (request.headers["content-type"] ?? "").split(";")[0]?.trim() ?? "";
    if (!ARCHIVE_TYPES.has(contentType)) {
      sendError(response, 415, "unsupported_media_type", `content type ${contentType} refused`);
      return;
    }
    const key = request.headers["idempotency-key"];
    if (key !== undefined && (Array.isArray(key) || !IDEMPOTENCY_KEY.test(key))) {
      sendError(
        response,
        400,
        "invalid_idempotency_key",
        "Idempotency-Key must be 1-255 visible ASCII characters",
      );
      return;
    }

    const received: ReceivedUpload = {
      pipeline: pipelineId,
      headers: request.headers,
      entries: [],
      bytes: 0,
      status: undefined,
    };
    const contents = new Map<string, Buffer>();
    let tooLarge = false;
    const limit = this.#maxUploadBytes;
    const counter = new Transform({
      transform(chunk: Buffer, _encoding, callback: TransformCallback) {
        received.bytes += chunk.length;
        if (received.bytes > limit) {
          tooLarge = true;
          callback(new Error("upload too large"));
          return;
        }
        callback(null, chunk);
      },
    });
    const parser = new Parser({
      strict: true,
      onReadEntry: (entry: ReadEntry) => {
        const hash = createHash("sha256");
        let size = 0;
        const keep = entry.path === "manifest.json";
        const chunks: Buffer[] = [];
        entry.on("data", (chunk: Buffer) => {
          hash.update(chunk);
          size += chunk.length;
          if (keep) chunks.push(chunk);
        });
        entry.on("end", () => {
          received.entries.push({
            path: entry.path,
            type: entry.type,
            mode: entry.mode,
            size,
            sha256: `sha256:${hash.digest("hex")}`,
            uid: entry.header.uid,
            gid: entry.header.gid,
            uname: entry.header.uname,
            gname: entry.header.gname,
          });
          if (keep) contents.set(entry.path, Buffer.concat(chunks));
        });
      },
    });
    const sink = parser as unknown as Writable;
    try {
      if (contentType === "application/x-tar") await pipeline(request, counter, sink);
      else await pipeline(request, counter, createGunzip(), sink);
    } catch (error) {
      if (tooLarge) {
        received.status = 413;
        this.uploads.push(received);
        sendError(response, 413, "upload_too_large", `upload exceeds ${limit} bytes`);
        request.resume();
        return;
      }
      if (request.destroyed && !request.complete) return; // the client went away
      received.status = 422;
      this.uploads.push(received);
      sendError(
        response,
        422,
        "archive_invalid",
        `archive unreadable: ${(error as Error).message}`,
      );
      return;
    }
    this.uploads.push(received);

    const problem = checkBundle(received.entries, contents.get("manifest.json"));
    if (typeof problem === "string") {
      received.status = 422;
      sendError(response, 422, "bundle_invalid", problem);
      return;
    }
    const manifest = problem;
    const manifestKey = `${manifest.id} ${manifest.digest} ${manifest.created}`;
    const scope = key === undefined ? undefined : `${token}\n${pipelineId}\n${key}`;
    const previous = scope === undefined ? undefined : this.#idempotency.get(scope);
    if (previous !== undefined) {
      if (previous.manifestKey !== manifestKey) {
        received.status = 409;
        sendError(
          response,
          409,
          "idempotency_conflict",
          `Idempotency-Key ${key} was used for another bundle`,
        );
        return;
      }
      received.status = 200;
      response.setHeader("idempotency-replayed", "true");
      sendJson(response, 200, previous.body);
      return;
    }

    const runId = `run-${this.#runs.size + 1}`;
    const body = {
      run_id: runId,
      pipeline_id: pipelineId,
      status: "queued",
      manifest,
      status_url: `/runs/${runId}`,
    };
    this.#runs.set(runId, {
      record: {
        run_id: runId,
        pipeline_id: pipelineId,
        status: "queued",
        accepted_at: new Date().toISOString(),
        started_at: null,
        finished_at: null,
        manifest,
        result: null,
        error: null,
      },
      statuses: [...this.runStatuses],
      polls: 0,
    });
    if (scope !== undefined) this.#idempotency.set(scope, { manifestKey, body });
    if (fault?.kind === "drop-after-accept") {
      request.socket.destroy();
      return;
    }
    received.status = 202;
    response.setHeader("location", `/runs/${runId}`);
    sendJson(response, 202, body);
  }

  #status(runId: string, request: IncomingMessage, response: ServerResponse): void {
    const fault = this.runFaults.shift();
    if (fault?.kind === "drop") {
      request.socket.destroy();
      return;
    }
    if (fault?.kind === "unavailable") {
      if (fault.retryAfter !== undefined) response.setHeader("retry-after", fault.retryAfter);
      sendError(response, 503, "unavailable", "status temporarily unavailable");
      return;
    }
    if (fault?.kind === "refuse") {
      sendError(response, fault.status, fault.code, fault.message);
      return;
    }
    if (this.#token(request, response) === undefined) return;
    const run = this.#runs.get(runId);
    if (run === undefined) {
      sendError(response, 404, "run_not_found", `unknown run ${runId}`);
      return;
    }
    run.polls += 1;
    const status = run.statuses[Math.min(run.polls, run.statuses.length) - 1] ?? "queued";
    const now = new Date().toISOString();
    const record = run.record;
    record.status = status;
    if (status === "running" || status === "succeeded" || status === "failed") {
      record.started_at ??= now;
    }
    if (status === "succeeded" || status === "failed") {
      record.finished_at ??= now;
      record.result = { counts: {}, actions: [], pipeline_errors: [], interrupted: false };
    }
    if (status === "failed") {
      record.error = { code: "publish_failed", message: "destination archive failed" };
    }
    sendJson(response, 200, record);
  }
}

/**
 * The manifest identity when the received entries are the bundle the manifest describes (every
 * listed file present with its size and sha256, the digest right, nothing but files and
 * directories), else the problem.
 */
function checkBundle(
  entries: readonly ReceivedEntry[],
  manifestBytes: Buffer | undefined,
): { id: string; digest: string; created: string } | string {
  if (manifestBytes === undefined) return "manifest.json missing from the archive";
  for (const entry of entries) {
    if (entry.type !== "File" && entry.type !== "Directory") {
      return `${entry.path}: ${entry.type} entries are refused`;
    }
  }
  let manifest: {
    id: string;
    created: string;
    digest: string;
    files: { path: string; sha256: string; size: number }[];
  };
  try {
    manifest = JSON.parse(manifestBytes.toString("utf8"));
  } catch (error) {
    return `manifest.json: ${(error as Error).message}`;
  }
  const byPath = new Map(entries.map((entry) => [entry.path, entry]));
  for (const file of manifest.files) {
    const entry = byPath.get(file.path);
    if (entry === undefined) return `${file.path}: listed but missing from the archive`;
    if (entry.sha256 !== file.sha256 || entry.size !== file.size) {
      return `${file.path}: sha256 mismatch: expected ${file.sha256}, got ${entry.sha256}`;
    }
  }
  const lines = [...manifest.files]
    .sort((a, b) => Buffer.compare(Buffer.from(a.path), Buffer.from(b.path)))
    .map((file) => `${file.sha256} ${file.size} ${file.path}\n`)
    .join("");
  const digest = `sha256:${createHash("sha256").update(lines).digest("hex")}`;
  if (digest !== manifest.digest)
    return `manifest.json: digest ${manifest.digest} is not ${digest}`;
  return { id: manifest.id, digest: manifest.digest, created: manifest.created };
}

function sendJson(response: ServerResponse, status: number, body: unknown): void {
  const text = `${JSON.stringify(body)}\n`;
  response.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
  });
  response.end(text);
}

function sendError(response: ServerResponse, status: number, code: string, message: string) {
  sendJson(response, status, { error: { code, message } });
}
