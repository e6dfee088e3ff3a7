import { randomUUID } from "node:crypto";
import { lstat, mkdir } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { createLocalBackend } from "@distributor/storage";
import type { Config, PipelineConfig } from "../config/types.js";
import { errorCode, errorMessage } from "../workflows/errors.js";
import { type RunReport, run, runSucceeded } from "../workflows/run.js";
import { WorkflowError, type WorkflowOptions } from "../workflows/shared.js";
import { authenticate, type ResolvedToken, resolveUploadTokens } from "./auth.js";
import { errorBody, HttpError, sendBeforeBody, sendJson } from "./http-error.js";
import { createMemoryUploadStore } from "./memory-store.js";
import {
  createUploadDirectory,
  extractUpload,
  removeUploadDirectory,
  type StagedUpload,
  stagedManifest,
  validateStaged,
} from "./staging.js";
import type {
  AcceptedUpload,
  IdempotencyScope,
  ManifestIdentity,
  UploadJob,
  UploadRunRecord,
  UploadStore,
} from "./store.js";
import { createWorkers } from "./workers.js";

/** One JSON log line's worth of what the server did; tokens never appear, only their ids. */
export type UploadServerEvent =
  | { type: "listening"; address: string; url: string }
  | {
      type: "request";
      method: string;
      path: string;
      status: number;
      duration_ms: number;
      token_id: string | null;
      pipeline_id: string | null;
      run_id: string | null;
      error_code: string | null;
      replayed: boolean;
    }
  | {
      type: "run";
      run_id: string;
      pipeline_id: string;
      status: "succeeded" | "failed";
      started_at: string;
      finished_at: string;
      duration_ms: number;
      error: { code: string; message: string } | null;
    }
  | { type: "shutdown"; phase: "started" | "finished"; running: number };

export interface UploadServerOptions extends WorkflowOptions<UploadServerEvent> {
  config: Config;
  /** Where status, idempotency records and the queue live (default: in memory). */
  store?: UploadStore;
  /** Where token references resolve (default `process.env`). */
  env?: NodeJS.ProcessEnv;
  /**
   * How long a run waits for another run's lease on a shared destination root (default 10
   * minutes): runs of different pipelines that share a root queue behind each other.
   */
  lockTimeoutMs?: number;
  /** Recorded as `distributor_version` in written state. */
  distributorVersion?: string;
}

export interface UploadServerAddress {
  host: string;
  port: number;
  /** `http://host:port`, for clients and the startup log line. */
  url: string;
}

export interface UploadServer {
  /** Starts listening on `host:port` (default `server.http.listen`); port 0 picks a free port. */
  listen(address?: string): Promise<UploadServerAddress>;
  /** The bound address once listening. */
  readonly address: UploadServerAddress | undefined;
  /**
   * Graceful shutdown: stops accepting connections and uploads, lets uploads being received
   * and every accepted run finish, then closes. Idempotent.
   */
  close(): Promise<void>;
}

const DEFAULT_LOCK_TIMEOUT_MS = 10 * 60 * 1000;
const ACCEPTED_CONTENT_TYPES: ReadonlySet<string> = new Set([
  "application/x-tar",
  "application/gzip",
  "application/x-gzip",
]);
/** 1–255 visible ASCII characters (SPEC §10). */
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;
const RETRY_AFTER_SECONDS = "5";

/**
 * Creates the HTTP upload server of SPEC §10. Upload tokens are resolved here, so a missing,
 * empty or duplicated token fails before anything listens.
 */
export async function createUploadServer(options: UploadServerOptions): Promise<UploadServer> {
  const { config } = options;
  const http = config.server.http;
  const uploadPipelines = config.pipelines.filter((p) => p.source.backend === "http_upload");
  if (uploadPipelines.length === 0) {
    throw new WorkflowError(
      "nothing_to_serve",
      `${config.sourceName}: no pipeline has an http_upload source, so there is nothing to serve`,
    );
  }
  const tokens = await resolveUploadTokens(config, {
    ...(options.env ? { env: options.env } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
  });
  await prepareStagingRoot(http.stagingDirectory);

  const now = () => options.now?.() ?? new Date();
  const emit = (event: UploadServerEvent) => options.onEvent?.(event);
  const store =
    options.store ??
    createMemoryUploadStore({ queueSize: http.queueSize, retentionMs: http.retentionMs });
  const workers = createWorkers({
    store,
    workers: http.workers,
    execute: (job) => executeRun(job),
  });
  const inFlight = new Set<Promise<void>>();
  let closing: Promise<void> | undefined;
  let bound: UploadServerAddress | undefined;

  const server: Server = createServer((request, response) => {
    const handling = handle(request, response);
    inFlight.add(handling);
    void handling.finally(() => inFlight.delete(handling));
  });

  // Finished records leave with the retention even when nobody asks for them.
  const sweeper = setInterval(
    () => void store.expire(now()).catch(() => undefined),
    Math.max(1000, Math.min(http.retentionMs, 60_000)),
  );
  sweeper.unref();

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const started = Date.now();
    const log = {
      method: request.method ?? "GET",
      path: pathOf(request.url),
      token_id: null as string | null,
      pipeline_id: null as string | null,
      run_id: null as string | null,
      error_code: null as string | null,
      replayed: false,
    };
    try {
      await store.expire(now());
      if (closing !== undefined) {
        throw new HttpError(503, "shutting_down", "the server is shutting down", {
          headers: { "Retry-After": RETRY_AFTER_SECONDS },
        });
      }
      await route(request, response, log);
    } catch (error) {
      const refusal =
        error instanceof HttpError
          ? error
          : new HttpError(500, "internal_error", `internal error: ${errorMessage(error)}`);
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
    }
  }

  type RequestLog = {
    token_id: string | null;
    pipeline_id: string | null;
    run_id: string | null;
    replayed: boolean;
  };

  async function route(request: IncomingMessage, response: ServerResponse, log: RequestLog) {
    const segments = pathOf(request.url).split("/").slice(1);
    const method = request.method ?? "GET";
    if (segments.length === 1 && segments[0] === "healthz") {
      allow(method, "GET");
      sendJson(response, 200, { ok: true });
      return;
    }
    if (segments.length === 3 && segments[0] === "pipelines" && segments[2] === "uploads") {
      allow(method, "POST");
      await upload(request, response, decodeSegment(segments[1] ?? ""), log);
      return;
    }
    if (segments.length === 2 && segments[0] === "runs") {
      allow(method, "GET");
      await status(request, response, decodeSegment(segments[1] ?? ""), log);
      return;
    }
    throw new HttpError(404, "not_found", `no such endpoint: ${method} ${pathOf(request.url)}`);
  }

  function authorize(request: IncomingMessage, log: RequestLog): ResolvedToken {
    const token = authenticate(tokens, request.headers.authorization);
    if (typeof token === "string") {
      throw new HttpError(
        401,
        "unauthorized",
        token === "missing"
          ? "an Authorization: Bearer <token> header is required"
          : "the bearer token is not valid",
        { headers: { "WWW-Authenticate": 'Bearer realm="distributor"' } },
      );
    }
    log.token_id = token.id;
    return token;
  }

  async function status(
    request: IncomingMessage,
    response: ServerResponse,
    runId: string,
    log: RequestLog,
  ) {
    const token = authorize(request, log);
    const stored = await store.getRun(runId);
    // Another token's run is as unknown as a missing one.
    if (stored === undefined || stored.tokenId !== token.id) {
      throw new HttpError(404, "run_not_found", `run ${JSON.stringify(runId)} not found`);
    }
    log.run_id = runId;
    log.pipeline_id = stored.record.pipeline_id;
    sendJson(response, 200, stored.record);
  }

  async function upload(
    request: IncomingMessage,
    response: ServerResponse,
    pipelineId: string,
    log: RequestLog,
  ) {
    const token = authorize(request, log);
    const pipeline = uploadPipelines.find((candidate) => candidate.id === pipelineId);
    if (pipeline === undefined || pipeline.source.backend !== "http_upload") {
      throw new HttpError(
        404,
        "pipeline_not_found",
        `pipeline ${JSON.stringify(pipelineId)} not found or does not accept uploads`,
      );
    }
    log.pipeline_id = pipeline.id;
    if (!token.allowPipelines.has(pipeline.id)) {
      throw new HttpError(
        403,
        "pipeline_not_allowed",
        `token ${token.id} may not upload to pipeline ${pipeline.id}`,
      );
    }
    const key = idempotencyKey(request);
    checkContentType(request);
    const maxUploadSize = pipeline.source.maxUploadSize;
    const declared = request.headers["content-length"];
    if (declared !== undefined && Number(declared) > maxUploadSize) {
      throw new HttpError(
        413,
        "upload_too_large",
        `upload body of ${declared} bytes is larger than the pipeline's max_upload_size of ${maxUploadSize} bytes`,
      );
    }

    const scope: IdempotencyScope | undefined =
      key === undefined ? undefined : { tokenId: token.id, pipelineId: pipeline.id, key };
    const earlier = scope === undefined ? undefined : await claim(scope);
    let slot = false;
    let staged: StagedUpload | undefined;
    let enqueued = false;
    try {
      // A replay stages its body too (its manifest must be compared), so it takes a place while
      // it does: queue_size bounds the uploads on disk, replays included.
      slot = await store.reserveQueueSlot();
      if (!slot) {
        throw new HttpError(
          503,
          "queue_full",
          `the upload queue is full (server.http.queue_size ${http.queueSize}); retry later`,
          { headers: { "Retry-After": RETRY_AFTER_SECONDS } },
        );
      }
      const directory = await createUploadDirectory(http.stagingDirectory);
      staged = { directory, bundleDirectory: directory };
      staged = await extractUpload(request, directory, pipeline, maxUploadSize);

      if (earlier !== undefined) {
        replay(response, earlier, await stagedManifest(staged), log);
        return;
      }
      const manifest = await validateStaged(staged, pipeline);
      const accepted = await enqueue(token, pipeline, manifest, staged, scope);
      enqueued = true;
      log.run_id = accepted.run_id;
      sendJson(response, 202, accepted, { Location: accepted.status_url });
    } finally {
      if (!enqueued) {
        if (staged !== undefined) await removeUploadDirectory(staged.directory);
        if (slot) await store.releaseQueueSlot();
        if (scope !== undefined && earlier === undefined) await store.releaseKey(scope);
      }
      workers.pump();
    }
  }

  /** Claims the key, waiting while another request stages with it; the accepted upload if any. */
  async function claim(scope: IdempotencyScope): Promise<AcceptedUpload | undefined> {
    for (;;) {
      const claimed = await store.claimKey(scope);
      if (claimed.kind === "claimed") return undefined;
      if (claimed.kind === "accepted") return claimed.accepted;
      await claimed.settled;
    }
  }

  function replay(
    response: ServerResponse,
    accepted: AcceptedUpload,
    manifest: ManifestIdentity,
    log: RequestLog,
  ) {
    log.run_id = accepted.run_id;
    const same =
      manifest.id === accepted.manifest.id &&
      manifest.digest === accepted.manifest.digest &&
      manifest.created === accepted.manifest.created;
    if (!same) {
      throw new HttpError(
        409,
        "idempotency_conflict",
        `Idempotency-Key was already used for run ${accepted.run_id} with manifest ${accepted.manifest.id} ${accepted.manifest.digest}; this upload holds ${manifest.id} ${manifest.digest}`,
      );
    }
    log.replayed = true;
    sendJson(response, 200, accepted, {
      Location: accepted.status_url,
      "Idempotency-Replayed": "true",
    });
  }

  async function enqueue(
    token: ResolvedToken,
    pipeline: PipelineConfig,
    manifest: ManifestIdentity,
    staged: StagedUpload,
    scope: IdempotencyScope | undefined,
  ): Promise<AcceptedUpload> {
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
      stagingDirectory: staged.directory,
      bundleDirectory: staged.bundleDirectory,
    };
    await store.enqueue({ record, tokenId: token.id }, job, accepted, scope);
    return accepted;
  }

  async function executeRun(job: UploadJob): Promise<void> {
    const startedAt = now();
    const started = Date.now();
    await store.updateRun(job.runId, { status: "running", started_at: startedAt.toISOString() });
    let report: RunReport | null = null;
    let error: { code: string; message: string } | null = null;
    // The staged root is the source root: like a local source, the bundle sits at its root or in
    // the archive's single top-level directory, and path_mapping decides where it is published.
    const source = createLocalBackend({ root: job.stagingDirectory });
    try {
      report = await run({
        config,
        pipelineIds: [job.pipelineId],
        sources: { [job.pipelineId]: source },
        lockTimeoutMs: options.lockTimeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS,
        ...(options.backends ? { backends: options.backends } : {}),
        ...(options.now ? { now: options.now } : {}),
        ...(options.distributorVersion ? { distributorVersion: options.distributorVersion } : {}),
      });
      if (!runSucceeded(report)) error = runFailure(report);
    } catch (failure) {
      error = { code: errorCode(failure), message: errorMessage(failure) };
    } finally {
      await source.close().catch(() => undefined);
      await removeUploadDirectory(job.stagingDirectory);
    }
    const finishedAt = now();
    const status = error === null ? "succeeded" : "failed";
    await store.updateRun(job.runId, {
      status,
      finished_at: finishedAt.toISOString(),
      result: report,
      error,
    });
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
  }

  const self: UploadServer = {
    get address() {
      return bound;
    },
    async listen(address = http.listen) {
      const { host, port } = parseListen(address);
      await new Promise<void>((resolve, reject) => {
        const onError = (error: NodeJS.ErrnoException) => {
          server.off("listening", onListening);
          reject(listenError(address, error));
        };
        const onListening = () => {
          server.off("error", onError);
          resolve();
        };
        server.once("error", onError);
        server.once("listening", onListening);
        server.listen(port, host);
      });
      const info = server.address() as AddressInfo;
      const shown = info.family === "IPv6" ? `[${info.address}]` : info.address;
      bound = { host: info.address, port: info.port, url: `http://${shown}:${info.port}` };
      emit({ type: "listening", address: `${shown}:${info.port}`, url: bound.url });
      return bound;
    },
    close() {
      closing ??= (async () => {
        emit({ type: "shutdown", phase: "started", running: workers.running() });
        const stopped = new Promise<void>((resolve) => {
          if (!server.listening) return resolve();
          server.close(() => resolve());
        });
        server.closeIdleConnections();
        await Promise.allSettled([...inFlight]);
        await workers.drained();
        clearInterval(sweeper);
        server.closeAllConnections();
        await stopped;
        emit({ type: "shutdown", phase: "finished", running: workers.running() });
      })();
      return closing;
    },
  };
  options.signal?.addEventListener("abort", () => void self.close(), { once: true });
  return self;
}

function allow(method: string, allowed: string) {
  if (method !== allowed) {
    throw new HttpError(405, "method_not_allowed", `use ${allowed} here, not ${method}`, {
      headers: { Allow: allowed },
    });
  }
}

function idempotencyKey(request: IncomingMessage): string | undefined {
  const value = request.headers["idempotency-key"];
  if (value === undefined) return undefined;
  if (typeof value !== "string" || !IDEMPOTENCY_KEY.test(value)) {
    throw new HttpError(
      400,
      "invalid_idempotency_key",
      "Idempotency-Key must be 1 to 255 visible ASCII characters",
    );
  }
  return value;
}

function checkContentType(request: IncomingMessage) {
  const header = request.headers["content-type"] ?? "";
  const type = header.split(";")[0]?.trim().toLowerCase() ?? "";
  if (!ACCEPTED_CONTENT_TYPES.has(type)) {
    throw new HttpError(
      415,
      "unsupported_media_type",
      `Content-Type must be application/x-tar, application/gzip or application/x-gzip, got ${JSON.stringify(header)}`,
    );
  }
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

function pathOf(url: string | undefined): string {
  const raw = url ?? "/";
  const query = raw.indexOf("?");
  return query < 0 ? raw : raw.slice(0, query);
}

function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new HttpError(400, "bad_request", `malformed path segment ${JSON.stringify(segment)}`);
  }
}

/** `host:port`, `[v6]:port` or `:port` (every interface). */
export function parseListen(address: string): { host: string | undefined; port: number } {
  const match = /^(?:\[([^\]]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(address);
  const port = Number(match?.[3]);
  if (match === null || !Number.isInteger(port) || port > 65535) {
    throw new WorkflowError(
      "invalid_listen_address",
      `listen address ${JSON.stringify(address)} must be host:port, [ipv6]:port or :port`,
    );
  }
  // An empty host (`:8080`) listens on every interface.
  const host = match[1] ?? match[2];
  return { host: host === "" ? undefined : host, port };
}

function listenError(address: string, error: NodeJS.ErrnoException): WorkflowError {
  const reason =
    error.code === "EADDRINUSE"
      ? "address already in use"
      : error.code === "EADDRNOTAVAIL"
        ? "address not available on this machine"
        : error.code === "EACCES"
          ? "permission denied"
          : error.message;
  return new WorkflowError("listen_failed", `cannot listen on ${address}: ${reason}`, {
    cause: error,
  });
}

/**
 * Creates the staging root, or accepts an existing one only when it is a real directory owned by
 * this user that no one else may write: the default lives in the shared temp directory, where
 * another local user could create it first and then swap a staged bundle between its validation
 * and its run, or point extraction elsewhere with a symlink.
 */
async function prepareStagingRoot(directory: string): Promise<void> {
  await mkdir(directory, { recursive: true, mode: 0o700 });
  const stats = await lstat(directory);
  const problem = stats.isSymbolicLink()
    ? "is a symlink"
    : !stats.isDirectory()
      ? "is not a directory"
      : process.geteuid !== undefined && stats.uid !== process.geteuid()
        ? `belongs to uid ${stats.uid}, not to this user (uid ${process.geteuid()})`
        : (stats.mode & 0o022) !== 0
          ? `may be written by other users (mode ${(stats.mode & 0o777).toString(8)})`
          : undefined;
  if (problem !== undefined) {
    throw new WorkflowError(
      "staging_unsafe",
      `server.http.staging_directory ${directory} ${problem}; use a private directory (mode 0700, owned by this user)`,
    );
  }
}
