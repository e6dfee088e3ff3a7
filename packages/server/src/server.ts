import { randomUUID } from "node:crypto";
import { setMaxListeners } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Config, PipelineConfig } from "@distributor/publish";
import {
  errorCode,
  errorMessage,
  parseDuration,
  pipelineConfigDigest,
  type RunReport,
  run,
  runSucceeded,
  signaturePolicy,
  WorkflowError,
  type WorkflowOptions,
} from "@distributor/publish";
import type { StorageBackend } from "@distributor/storage";
import { RUN_STATUSES } from "@distributor/upload-client/wire";
import { authenticate, type ResolvedToken, resolveUploadTokens } from "./auth.js";
import { errorBody, HttpError, sendBeforeBody, sendJson } from "./http-error.js";
import { createServerMetrics } from "./metrics.js";
import { readiness } from "./readiness.js";
import {
  createUploadDirectory,
  extractUpload,
  removeUploadDirectory,
  type StagedUpload,
  stagedManifest,
  syncTree,
  validateStaged,
} from "./staging/staging.js";
import { openStagingArea } from "./staging/staging-area.js";
import { openEmbeddedUploadStore, preparePrivateDirectory } from "./store/embedded-store.js";
import { createMemoryUploadStore } from "./store/memory-store.js";
import type {
  AcceptedUpload,
  IdempotencyScope,
  ManifestIdentity,
  UploadJob,
  UploadRunRecord,
  UploadRunStatus,
  UploadStore,
} from "./store/store.js";
import { summarizeRun } from "./summary.js";
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
      /** Body bytes of an upload (0 for other requests). */
      received_bytes: number;
    }
  | {
      type: "run";
      run_id: string;
      pipeline_id: string;
      status: "succeeded" | "failed";
      /** Null for a run cancelled before it started. */
      started_at: string | null;
      finished_at: string;
      duration_ms: number;
      error: { code: string; message: string } | null;
    }
  | {
      type: "recovered";
      /** Runs resumed from the store (queued again, including those that were running). */
      resumed: number;
      /** Staged directories removed because no live run owned them. */
      removed_staging: number;
      /** Live runs whose staged bundle was missing; they are recorded failed. */
      lost: number;
    }
  | {
      /** A run changed state (its finish is the `run` event). */
      type: "run_state";
      run_id: string;
      pipeline_id: string;
      state: "queued" | "started" | "cancel_requested" | "taken_over";
    }
  | { type: "warning"; message: string }
  | { type: "shutdown"; phase: "started" | "finished"; running: number };

/** How much a server event matters, for `server.log.level`. */
export type LogLevel = "debug" | "info" | "warn" | "error";

/** The level of each event: failures warn or err, the rest informs. */
export function eventLevel(event: UploadServerEvent): LogLevel {
  switch (event.type) {
    case "request":
      return event.status >= 500 ? "error" : "info";
    case "run":
      return event.status === "failed" ? "warn" : "info";
    case "warning":
      return "warn";
    default:
      return "info";
  }
}

export interface UploadServerOptions extends WorkflowOptions<UploadServerEvent> {
  config: Config;
  /**
   * Where status, idempotency records and the queue live (default: `server.store`, the embedded
   * durable store). A store given here is not closed by the server.
   */
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
/** How long a local store's failing write of a finished run's record is tried again. */
const FINAL_RECORD_RETRY_MS = 2 * 60 * 1000;
const ACCEPTED_CONTENT_TYPES: ReadonlySet<string> = new Set([
  "application/x-tar",
  "application/gzip",
  "application/x-gzip",
]);
/** 1–255 visible ASCII characters (docs/integrations/http-upload.md). */
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;
const RETRY_AFTER_SECONDS = "5";
/** Longest `?wait=` a status request may hold the connection. */
export const MAX_STATUS_WAIT_MS = 60_000;
/** `GET /runs` page size when `limit` is absent, and its largest value. */
export const DEFAULT_RUN_PAGE = 50;
export const MAX_RUN_PAGE = 500;

/**
 * Creates the HTTP upload server of docs/integrations/http-upload.md. Upload tokens are resolved and allowed_signers
 * files read here, so a missing, empty or duplicated token or an unusable allowed_signers file
 * fails before anything listens.
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
    onWarning: (message) => options.onEvent?.({ type: "warning", message }),
  });
  // An allowed_signers file that cannot be used fails before anything listens, not as a 500 on
  // the first upload; each upload reads it again, so rotated keys need no restart.
  for (const pipeline of uploadPipelines) {
    await signaturePolicy(pipeline, options.signal ? { signal: options.signal } : {});
  }
  // Shared staging (several instances) or this instance's own directory.
  const stagingArea = await openStagingArea(config, options.backends);
  try {
    await prepareStagingRoot(
      stagingArea.receiveRoot,
      config.server.staging?.backend === "local"
        ? "server.staging.path"
        : "server.http.staging_directory",
    );
  } catch (error) {
    await stagingArea.close().catch(() => undefined);
    throw error;
  }

  const now = () => options.now?.() ?? new Date();
  const emit = (event: UploadServerEvent) => options.onEvent?.(event);
  const store = options.store ?? (await openConfiguredStore(config));
  const ownStore = options.store === undefined;
  const workers = createWorkers({
    store,
    workers: http.workers,
    execute: (job) => executeRun(job),
    onError: (error) => emit({ type: "warning", message: `upload queue: ${errorMessage(error)}` }),
  });
  const inFlight = new Set<Promise<void>>();
  /** Running runs' controllers, by run id: a cancel aborts at the run's next safe point. */
  const runControls = new Map<string, AbortController>();
  /** Cancels asked for while a run was between the queue and its start. */
  const cancelRequests = new Set<string>();
  /** Ends long-polls when the server shuts down. */
  const stopping = new AbortController();
  let closing: Promise<void> | undefined;
  const metrics = createServerMetrics({
    pipelines: config.pipelines.filter((p) => p.source.backend === "http_upload").map((p) => p.id),
    queueDepth: () => store.queueLength(),
  });
  let bound: UploadServerAddress | undefined;

  try {
    await recover();
  } catch (error) {
    if (ownStore) await store.close().catch(() => undefined);
    await stagingArea.close().catch(() => undefined);
    throw error;
  }

  const server: Server = createServer((request, response) => {
    const handling = handle(request, response);
    inFlight.add(handling);
    void handling.finally(() => inFlight.delete(handling));
  });

  // A shared store gains jobs from other instances: look for them now and then.
  const poller =
    store.pollIntervalMs === undefined
      ? undefined
      : setInterval(() => {
          workers.pump();
          void stopCancelledRuns().catch(() => undefined);
        }, store.pollIntervalMs);
  poller?.unref();

  // Finished records leave with the retention even when nobody asks for them.
  const sweeper = setInterval(
    () => void store.expire(now()).catch(() => undefined),
    Math.max(1000, Math.min(http.retentionMs, 60_000)),
  );
  sweeper.unref();

  /**
   * docs/integrations/http-upload.md, durability: resumes every live run the store holds (a run that was running is queued
   * again), records the ones whose staged bundle is gone as failed, and removes staged data that
   * belongs to no live run. On shared staging other instances are alive: only data older than
   * `SHARED_STAGING_GRACE_MS` goes, since younger data may be an upload another instance is
   * receiving right now, before its run exists.
   */
  async function recover() {
    const jobs = await store.recover();
    const live = new Set<string>();
    let lost = 0;
    for (const job of jobs) {
      if (await stagingArea.exists(job)) {
        live.add(job.stagingDirectory);
        continue;
      }
      // Another instance holds the run (it may just have finished and removed its bundle).
      if ((await store.dequeue(job.runId)) === undefined) {
        live.add(job.stagingDirectory);
        continue;
      }
      lost += 1;
      await store.updateRun(job.runId, {
        status: "failed",
        finished_at: now().toISOString(),
        error: {
          code: "staged_bundle_missing",
          message: `the staged bundle ${job.bundleDirectory} of this run was gone when the server restarted`,
        },
      });
    }
    const removed = await stagingArea.removeOrphans(live, Date.now());
    if (jobs.length > 0 || removed > 0) {
      emit({ type: "recovered", resumed: jobs.length - lost, removed_staging: removed, lost });
    }
    workers.pump();
  }

  /**
   * Writes a finished run's record, trying again while the store is away: a shared store's run
   * left live under this instance's claim would wait for it forever, so there it keeps trying
   * (another instance takes the run over if this one's heartbeat lapses meanwhile, and this
   * change is then refused: false); a local store gives up after `FINAL_RECORD_RETRY_MS`, and
   * its next start queues the run again.
   */
  async function recordFinished(runId: string, change: Partial<UploadRunRecord>): Promise<boolean> {
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
  async function stopCancelledRuns() {
    if (runControls.size === 0 || store.cancelRequests === undefined) return;
    const asked = await store.cancelRequests([...runControls.keys()]);
    for (const [runId, reason] of asked) runControls.get(runId)?.abort(new Error(reason));
  }

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
      received_bytes: 0,
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
      if (log.path.endsWith("/uploads") && log.pipeline_id !== null) {
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

  type RequestLog = {
    token_id: string | null;
    pipeline_id: string | null;
    run_id: string | null;
    replayed: boolean;
    received_bytes: number;
  };

  async function route(request: IncomingMessage, response: ServerResponse, log: RequestLog) {
    const segments = pathOf(request.url).split("/").slice(1);
    const method = request.method ?? "GET";
    if (segments.length === 1 && segments[0] === "healthz") {
      allow(method, "GET");
      sendJson(response, 200, { ok: true });
      return;
    }
    if (segments.length === 1 && segments[0] === "readyz") {
      allow(method, "GET");
      const checks = await readiness(store, stagingArea);
      const ready = Object.values(checks).every((check) => check === "ok");
      response.writeHead(ready ? 200 : 503, { "Content-Type": "application/json" });
      response.end(`${JSON.stringify({ ready, checks })}\n`);
      return;
    }
    if (segments.length === 1 && segments[0] === "metrics") {
      allow(method, "GET");
      // Any upload token may read them, unless the operator made them public.
      if (!config.server.metrics.public) log.token_id = authorize(request, log).id;
      const text = await metrics.registry.metrics();
      response.writeHead(200, { "Content-Type": metrics.registry.contentType });
      response.end(text);
      return;
    }
    if (segments.length === 3 && segments[0] === "pipelines" && segments[2] === "uploads") {
      allow(method, "POST");
      await upload(request, response, decodeSegment(segments[1] ?? ""), log);
      return;
    }
    if (segments.length === 1 && segments[0] === "runs") {
      allow(method, "GET");
      await list(request, response, log);
      return;
    }
    if (segments.length === 2 && segments[0] === "runs") {
      allow(method, "GET");
      await status(request, response, decodeSegment(segments[1] ?? ""), log);
      return;
    }
    if (segments.length === 3 && segments[0] === "runs" && segments[2] === "cancel") {
      allow(method, "POST");
      await cancel(request, response, decodeSegment(segments[1] ?? ""), log);
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
    const wait = waitParameter(queryOf(request.url));
    let record = await ownRun(token, runId, log);
    // Long-poll: answer once the run has finished, or when the wait is over.
    const deadline = Date.now() + wait;
    while (!finished(record.status) && Date.now() < deadline && !stopping.signal.aborted) {
      await store.watchRun(runId, deadline - Date.now(), stopping.signal);
      record = await ownRun(token, runId, log);
    }
    sendJson(response, 200, record);
  }

  /** The token's own run; another token's run is as unknown as a missing one. */
  async function ownRun(token: ResolvedToken, runId: string, log: RequestLog) {
    const stored = await store.getRun(runId);
    if (stored === undefined || stored.tokenId !== token.id) {
      throw new HttpError(404, "run_not_found", `run ${JSON.stringify(runId)} not found`);
    }
    log.run_id = runId;
    log.pipeline_id = stored.record.pipeline_id;
    return stored.record;
  }

  /** `GET /runs?pipeline=&status=&limit=&cursor=`: the token's runs, newest first. */
  async function list(request: IncomingMessage, response: ServerResponse, log: RequestLog) {
    const token = authorize(request, log);
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
    const page = await store.listRuns({
      tokenId: token.id,
      limit,
      ...(pipelineId === undefined ? {} : { pipelineId }),
      ...(statusFilter === undefined ? {} : { status: statusFilter as UploadRunStatus }),
      ...(cursor === undefined ? {} : { cursor }),
    });
    sendJson(response, 200, page);
  }

  /**
   * `POST /runs/{id}/cancel`: a queued run is recorded failed (`cancelled`) at once (200); a
   * running one is asked to stop at its next safe point (202) and is recorded failed when it has.
   */
  async function cancel(
    request: IncomingMessage,
    response: ServerResponse,
    runId: string,
    log: RequestLog,
  ) {
    const token = authorize(request, log);
    const record = await ownRun(token, runId, log);
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
    let placed: Pick<UploadJob, "stagingDirectory" | "bundleDirectory"> | undefined;
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
      const directory = await createUploadDirectory(stagingArea.receiveRoot);
      staged = { directory, bundleDirectory: directory };
      staged = await extractUpload(
        request,
        directory,
        pipeline,
        maxUploadSize,
        contentTypeOf(request),
      );
      log.received_bytes = staged.receivedBytes ?? 0;

      if (earlier !== undefined) {
        replay(response, earlier, await stagedManifest(staged, pipeline), log);
        return;
      }
      const manifest = await validateStaged(staged, pipeline, { now });
      // A durable 202 promises the staged bytes too (a remote staging copy is durable once written).
      if (store.durable && !stagingArea.remote) await syncTree(staged.directory);
      placed = await stagingArea.place(staged);
      const accepted = await enqueue(token, pipeline, manifest, placed, scope);
      enqueued = true;
      log.run_id = accepted.run_id;
      sendJson(response, 202, accepted, { Location: accepted.status_url });
    } finally {
      if (!enqueued) {
        if (staged !== undefined) await removeUploadDirectory(staged.directory);
        if (placed !== undefined) await stagingArea.remove(placed);
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
    staged: Pick<UploadJob, "stagingDirectory" | "bundleDirectory">,
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
      stagingDirectory: staged.stagingDirectory,
      bundleDirectory: staged.bundleDirectory,
      configDigest: pipelineConfigDigest(pipeline),
    };
    await store.enqueue({ record, tokenId: token.id }, job, accepted, scope);
    emit({ type: "run_state", run_id: runId, pipeline_id: pipeline.id, state: "queued" });
    return accepted;
  }

  async function executeRun(job: UploadJob): Promise<void> {
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
        metrics.takeover();
        emit({
          type: "run_state",
          run_id: job.runId,
          pipeline_id: job.pipelineId,
          state: "taken_over",
        });
        return;
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
    const recorded = await recordFinished(job.runId, {
      status,
      finished_at: finishedAt.toISOString(),
      result: report === null ? null : summarizeRun(report),
      error,
    });
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
    if (!recorded) {
      // Taken over while it ran (this instance's claim lapsed): the record is the new holder's,
      // and so is the staged bundle it is reading; the commit protocol's lease kept the two runs
      // from writing one destination at once.
      emit({
        type: "warning",
        message: `run ${job.runId}: taken over by another instance while it ran here; its record and staged bundle are left to it`,
      });
      metrics.takeover();
      emit({
        type: "run_state",
        run_id: job.runId,
        pipeline_id: job.pipelineId,
        state: "taken_over",
      });
      return;
    }
    await stagingArea.remove(job);
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
        stopping.abort();
        const stopped = new Promise<void>((resolve) => {
          if (!server.listening) return resolve();
          server.close(() => resolve());
        });
        server.closeIdleConnections();
        await Promise.allSettled([...inFlight]);
        await workers.drained();
        clearInterval(sweeper);
        if (poller !== undefined) clearInterval(poller);
        await stagingArea.close().catch(() => undefined);
        server.closeAllConnections();
        await stopped;
        if (ownStore) await store.close();
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

function contentTypeOf(request: IncomingMessage): string {
  const header = request.headers["content-type"] ?? "";
  return header.split(";")[0]?.trim().toLowerCase() ?? "";
}

function checkContentType(request: IncomingMessage) {
  const header = request.headers["content-type"] ?? "";
  if (!ACCEPTED_CONTENT_TYPES.has(contentTypeOf(request))) {
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

function finished(status: UploadRunStatus): boolean {
  return status === "succeeded" || status === "failed";
}

function queryOf(url: string | undefined): URLSearchParams {
  const raw = url ?? "/";
  const query = raw.indexOf("?");
  return new URLSearchParams(query < 0 ? "" : raw.slice(query + 1));
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

/** The store `server.store` configures. */
async function openConfiguredStore(config: Config): Promise<UploadStore> {
  const limits = {
    queueSize: config.server.http.queueSize,
    retentionMs: config.server.http.retentionMs,
    maxRuns: config.server.store.maxRuns,
  };
  if (config.server.store.backend === "memory") return createMemoryUploadStore(limits);
  if (config.server.store.backend === "postgres") {
    throw new WorkflowError(
      "store_not_given",
      "server.store.backend postgres: open the store with openPostgresUploadStore from @distributor/store-postgres and pass it as `store`",
    );
  }
  return openEmbeddedUploadStore({
    ...limits,
    path: config.server.store.path,
    service: config.server.service,
  });
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
async function prepareStagingRoot(directory: string, key: string): Promise<void> {
  await preparePrivateDirectory(directory, { code: "staging_unsafe", key });
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
