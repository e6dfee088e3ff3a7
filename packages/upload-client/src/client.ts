import {
  BUNDLE_ARCHIVE_CONTENT_TYPE,
  packBundle,
  type SignOptions,
  signBundleManifest,
  type ValidateBundleOptions,
  validateBundleDirectory,
} from "@distributor/bundle";
import { formatMs, isUploadError, RunWaitTimeoutError, UploadError } from "./errors.js";
import { generateIdempotencyKey, idempotencyKeyProblem } from "./idempotency.js";
import type { AcceptedUpload } from "./records.js";
import { parseRetryAfter, type RetryPolicy, retryDelay, retryPolicy, sleep } from "./retry.js";
import {
  AcceptedBodySchema,
  type CancelAnswer,
  CancelAnswerSchema,
  ErrorBodySchema,
  isFinished,
  parseWire,
  type RunPage,
  RunPageSchema,
  type RunRecord,
  RunRecordSchema,
  type RunStatus,
} from "./wire.js";

export interface UploadClientOptions {
  /** Base URL of `distributor serve`, e.g. `http://127.0.0.1:8080` (a path prefix is kept). */
  server: string | URL;
  /** Upload token, sent as `Authorization: Bearer <token>`. */
  token: string;
  /** The `fetch` to use; default the global one. */
  fetch?: typeof globalThis.fetch;
  /** Retry policy for every request; each field defaults as in `DEFAULT_RETRY_POLICY`. */
  retry?: Partial<RetryPolicy>;
  /** Bounded waits of every request; a request that exceeds one fails as retryable `timeout`. */
  timeouts?: Partial<ClientTimeouts>;
}

export interface ClientTimeouts {
  /**
   * Until the server takes the request: for an upload, until it reads the first bytes of the
   * body; for a status request, added to `requestMs`. Default 10 s.
   */
  connectMs: number;
  /**
   * Longest silence once connected: between two body chunks the server reads, and from the end of
   * the body (or of a status request's long-poll) to its answer. Default 60 s.
   */
  requestMs: number;
}

export const DEFAULT_TIMEOUTS: Readonly<ClientTimeouts> = Object.freeze({
  connectMs: 10_000,
  requestMs: 60_000,
});
/** The long-poll `waitForRun` asks the server for (`GET /runs/{id}?wait=`), at most. */
export const LONG_POLL_MS = 30_000;

/** What an upload validates locally: the pipeline's `validation` block, where it is not the default. */
export type UploadValidationOptions = Pick<
  ValidateBundleOptions,
  "unlistedFiles" | "maxFiles" | "maxTotalSize"
>;

export interface UploadOptions {
  /** Pipeline whose `http_upload` source receives the bundle. */
  pipeline: string;
  /** `Idempotency-Key` (1–255 visible ASCII); generated when absent. Every retry sends the same key. */
  idempotencyKey?: string;
  signal?: AbortSignal;
  /** Retries after a 503 or a broken connection: a count, or a policy overriding the client's. */
  retries?: number | Partial<RetryPolicy>;
  /** Local validation before anything is sent; default the docs/design/bundles.md defaults. */
  validation?: UploadValidationOptions;
  /** Called before each retry, e.g. to log it. */
  onRetry?: (retry: RetryNotice) => void;
  /**
   * Sign the bundle's manifest first (`ssh-keygen -Y sign`), writing `manifest.json.sig` into the
   * bundle directory, which the archive then carries. Without it a `manifest.json.sig` already
   * there is sent as it is.
   */
  sign?: Omit<SignOptions, "signal">;
}

export interface RetryNotice {
  /** The attempt that failed (1 for the first request). */
  attempt: number;
  delayMs: number;
  error: UploadError;
}

export interface GetRunOptions {
  signal?: AbortSignal;
  /** Long-poll: the server answers once the run has finished or after this long (at most 60 s). */
  waitMs?: number;
  retries?: number | Partial<RetryPolicy>;
}

export interface WaitForRunOptions {
  /** Give up (with `RunWaitTimeoutError`) after this long; default one hour. */
  timeoutMs?: number;
  /** First delay between polls; it grows by half each poll up to `maxPollIntervalMs`. Default 1 s. */
  pollIntervalMs?: number;
  /** Longest delay between polls; default 10 s (or `pollIntervalMs` when larger). */
  maxPollIntervalMs?: number;
  signal?: AbortSignal;
  /** Called with every status record received, finished or not. */
  onStatus?: (record: RunRecord) => void;
}

export interface ListRunsOptions {
  /** Only runs of this pipeline. */
  pipeline?: string;
  /** Only runs with this status. */
  status?: RunStatus;
  /** Runs per page (the server allows 1 to 500; its default is 50). */
  limit?: number;
  /** The `next_cursor` of the previous page. */
  cursor?: string;
  signal?: AbortSignal;
  retries?: number | Partial<RetryPolicy>;
}

export interface CancelRunOptions {
  signal?: AbortSignal;
}

/** What `POST /runs/{id}/cancel` answered. */
export interface CancelledRun {
  /** The run's record: failed with `cancelled` when it was still queued, else as it was. */
  record: RunRecord;
  /**
   * True when the run was running: it stops at its next safe point and is recorded failed then
   * (follow it with `waitForRun`). False when it was cancelled before it started.
   */
  cancelRequested: boolean;
}

export interface UploadClient {
  /** The server base URL, ending in `/`. */
  readonly server: URL;
  /**
   * Validates the bundle directory (manifest, every listed file's size and sha256, no unlisted or
   * irregular files), then streams it as a gzip tar archive to
   * `POST /pipelines/{pipeline}/uploads`. Resolves with the accepted record, also when the server
   * replays an upload it had already accepted under the same idempotency key.
   */
  upload(bundleDirectory: string, options: UploadOptions): Promise<AcceptedUpload>;
  /** `GET /runs/{runId}`. */
  getRun(runId: string, options?: GetRunOptions): Promise<RunRecord>;
  /** Polls the run until it has succeeded or failed, and resolves with that record (failed included). */
  waitForRun(runId: string, options?: WaitForRunOptions): Promise<RunRecord>;
  /** `GET /runs`: one page of the token's runs, newest first. */
  listRuns(options?: ListRunsOptions): Promise<RunPage>;
  /**
   * `POST /runs/{runId}/cancel`: a queued run is cancelled at once; a running one is asked to stop.
   * Not retried (a retry after a lost answer would be refused with 409 `run_finished`).
   */
  cancelRun(runId: string, options?: CancelRunOptions): Promise<CancelledRun>;
}

export const DEFAULT_WAIT_TIMEOUT_MS = 60 * 60 * 1000;
export const DEFAULT_POLL_INTERVAL_MS = 1000;
export const DEFAULT_MAX_POLL_INTERVAL_MS = 10_000;
/** Largest response body read; the protocol's bodies are small JSON documents. */
const MAX_RESPONSE_BYTES = 1024 * 1024;
/** Statuses worth another request: the server or a proxy in front of it is briefly unable. */
const RETRYABLE_STATUSES: ReadonlySet<number> = new Set([408, 429, 502, 503, 504]);

export function createUploadClient(options: UploadClientOptions): UploadClient {
  const server = baseUrl(options.server);
  if (typeof options.token !== "string" || options.token === "") {
    throw new TypeError("upload client token must be a non-empty string");
  }
  const token = options.token;
  const clientPolicy = retryPolicy(options.retry);
  const timeouts: ClientTimeouts = { ...DEFAULT_TIMEOUTS, ...options.timeouts };
  const fetchFn = (input: string, init: RequestInit) =>
    (options.fetch ?? globalThis.fetch)(input, init);

  /**
   * One request, aborted when a bounded wait passes: `deadline.arm(ms)` (re)starts the timer, so
   * an upload's body re-arms it with every chunk the server reads.
   */
  async function send(
    url: string,
    init: RequestInit,
    operation: string,
    deadline: Deadline = createDeadline(timeouts.connectMs + timeouts.requestMs),
  ): Promise<Response> {
    const caller = init.signal ?? undefined;
    const signal =
      caller === undefined ? deadline.signal : AbortSignal.any([caller, deadline.signal]);
    try {
      return await fetchFn(url, { ...init, signal });
    } catch (error) {
      if (caller?.aborted) throw caller.reason;
      if (deadline.signal.aborted) {
        throw new UploadError(
          `${operation}: no answer within ${formatMs(deadline.lastMs())} (the server or the network stalled)`,
          { code: "timeout", retryable: true, cause: error },
        );
      }
      throw new UploadError(`${operation}: cannot reach the server: ${networkDetail(error)}`, {
        code: "connection_failed",
        retryable: true,
        cause: error,
      });
    }
  }

  async function readBody(response: Response, operation: string): Promise<unknown> {
    let text: string;
    try {
      text = await boundedText(response, MAX_RESPONSE_BYTES);
    } catch (error) {
      if (isUploadError(error)) throw error;
      throw new UploadError(
        `${operation}: the connection broke while reading the answer: ${networkDetail(error)}`,
        { status: response.status, code: "connection_failed", retryable: true, cause: error },
      );
    }
    try {
      return JSON.parse(text);
    } catch {
      return undefined;
    }
  }

  async function refusal(response: Response, operation: string): Promise<UploadError> {
    const retryAfterMs = parseRetryAfter(response.headers.get("retry-after"));
    let body: unknown;
    try {
      body = await readBody(response, operation);
    } catch {
      body = undefined;
    }
    const checked = parseWire(ErrorBodySchema, body);
    const parsed = checked.ok ? checked.value.error : undefined;
    const code = parsed?.code ?? `http_${response.status}`;
    const detail = parsed === undefined ? "" : `: ${parsed.message}`;
    const wait = retryAfterMs === undefined ? "" : ` (retry after ${formatMs(retryAfterMs)})`;
    return new UploadError(
      `${operation}: server answered ${response.status} ${code}${detail}${wait}`,
      {
        status: response.status,
        code,
        serverMessage: parsed?.message,
        retryAfterMs,
        retryable: RETRYABLE_STATUSES.has(response.status),
      },
    );
  }

  function invalidResponse(operation: string, response: Response, problem: string): UploadError {
    return new UploadError(
      `${operation}: the server's ${response.status} answer is not an upload API response: ${problem}`,
      { status: response.status, code: "invalid_response" },
    );
  }

  async function withRetries<T>(
    policy: RetryPolicy,
    signal: AbortSignal | undefined,
    onRetry: ((notice: RetryNotice) => void) | undefined,
    attempt: () => Promise<T>,
  ): Promise<T> {
    const started = Date.now();
    for (let count = 1; ; count++) {
      signal?.throwIfAborted();
      try {
        return await attempt();
      } catch (error) {
        if (!isUploadError(error) || !error.retryable) throw error;
        if (count >= policy.attempts) {
          throw error.afterAttempts(count, `gave up after ${plural(count, "attempt")}`);
        }
        const delayMs = retryDelay(count, error.retryAfterMs, policy);
        if (Date.now() - started + delayMs > policy.maxElapsedMs) {
          throw error.afterAttempts(
            count,
            `gave up after ${plural(count, "attempt")}: waiting ${formatMs(delayMs)} more would exceed the retry time limit of ${formatMs(policy.maxElapsedMs)}`,
          );
        }
        onRetry?.({ attempt: count, delayMs, error });
        await sleep(delayMs, signal);
      }
    }
  }

  const headers = (extra: Record<string, string> = {}) => ({
    authorization: `Bearer ${token}`,
    accept: "application/json",
    ...extra,
  });

  const client: UploadClient = {
    server,

    async upload(bundleDirectory, uploadOptions) {
      const { pipeline, signal } = uploadOptions;
      if (typeof pipeline !== "string" || pipeline === "") {
        throw new TypeError("upload requires a pipeline id");
      }
      const idempotencyKey = uploadOptions.idempotencyKey ?? generateIdempotencyKey();
      const keyProblem = idempotencyKeyProblem(idempotencyKey);
      if (keyProblem !== undefined) throw new RangeError(keyProblem);
      const policy = retryPolicy(uploadOptions.retries, clientPolicy);
      signal?.throwIfAborted();
      if (uploadOptions.sign !== undefined) {
        await signBundleManifest(bundleDirectory, { ...uploadOptions.sign, signal });
      }

      // A broken bundle is the producer's to fix: say so before sending a byte.
      const validated = await validateBundleDirectory(bundleDirectory, {
        ...uploadOptions.validation,
        ...(signal === undefined ? {} : { signal }),
      });
      const url = new URL(`pipelines/${encodeURIComponent(pipeline)}/uploads`, server).href;
      const operation = `upload of ${validated.manifest.id} to ${url}`;

      return withRetries(policy, signal, uploadOptions.onRetry, async () => {
        // A consumed body cannot be sent again, so every attempt packs afresh.
        const packed = await packBundle(bundleDirectory, {
          mtime: validated.manifest.created,
          ...(signal === undefined ? {} : { signal }),
        });
        let bodyError: unknown;
        packed.stream.on("error", (error) => {
          bodyError ??= error;
        });
        const deadline = createDeadline(timeouts.connectMs);
        const body = pacedBody(packed.stream, deadline, timeouts.requestMs);
        try {
          let response: Response;
          try {
            response = await send(
              url,
              {
                method: "POST",
                headers: headers({
                  "content-type": BUNDLE_ARCHIVE_CONTENT_TYPE,
                  "idempotency-key": idempotencyKey,
                }),
                body,
                duplex: "half",
                ...(signal === undefined ? {} : { signal }),
              },
              operation,
              deadline,
            );
          } catch (error) {
            // The bundle changed while it was packed: not the connection's fault, not retried.
            if (bodyError !== undefined && !isAbort(bodyError)) throw bodyError;
            throw error;
          }
          if (response.status !== 200 && response.status !== 201 && response.status !== 202) {
            throw await refusal(response, operation);
          }
          const answer = await readBody(response, operation);
          deadline.clear();
          const accepted = parseWire(AcceptedBodySchema, answer);
          if (!accepted.ok) throw invalidResponse(operation, response, accepted.problem);
          return {
            ...accepted.value,
            status_url: new URL(accepted.value.status_url, server).href,
            replayed: response.headers.get("idempotency-replayed")?.toLowerCase() === "true",
            idempotency_key: idempotencyKey,
          };
        } finally {
          deadline.clear();
          // An early answer (a refusal before the body was read) leaves files open otherwise.
          packed.stream.destroy();
        }
      });
    },

    async getRun(runId, getOptions = {}) {
      if (typeof runId !== "string" || runId === "")
        throw new TypeError("getRun requires a run id");
      const { signal } = getOptions;
      const policy = retryPolicy(getOptions.retries, clientPolicy);
      const waitMs = Math.max(0, Math.floor((getOptions.waitMs ?? 0) / 1000)) * 1000;
      const url = new URL(`runs/${encodeURIComponent(runId)}`, server);
      if (waitMs > 0) url.searchParams.set("wait", `${waitMs / 1000}s`);
      const operation = `status of run ${runId} from ${url.href}`;
      return withRetries(policy, signal, undefined, async () => {
        const deadline = createDeadline(timeouts.connectMs + timeouts.requestMs + waitMs);
        let answer: unknown;
        let response: Response;
        try {
          response = await send(
            url.href,
            { method: "GET", headers: headers(), ...(signal === undefined ? {} : { signal }) },
            operation,
            deadline,
          );
          if (response.status !== 200) {
            deadline.clear();
            throw await refusal(response, operation);
          }
          answer = await readBody(response, operation);
        } finally {
          // Cleared whatever happened: a server that restarted refuses the connection at once.
          deadline.clear();
        }
        const record = parseWire(RunRecordSchema, answer);
        if (!record.ok) throw invalidResponse(operation, response, record.problem);
        return record.value;
      });
    },

    async listRuns(listOptions = {}) {
      const { signal } = listOptions;
      const policy = retryPolicy(listOptions.retries, clientPolicy);
      const url = new URL("runs", server);
      if (listOptions.pipeline !== undefined)
        url.searchParams.set("pipeline", listOptions.pipeline);
      if (listOptions.status !== undefined) url.searchParams.set("status", listOptions.status);
      if (listOptions.limit !== undefined) url.searchParams.set("limit", String(listOptions.limit));
      if (listOptions.cursor !== undefined) url.searchParams.set("cursor", listOptions.cursor);
      const operation = `list of runs from ${url.href}`;
      return withRetries(policy, signal, undefined, async () => {
        const response = await send(
          url.href,
          { method: "GET", headers: headers(), ...(signal === undefined ? {} : { signal }) },
          operation,
        );
        if (response.status !== 200) throw await refusal(response, operation);
        const page = parseWire(RunPageSchema, await readBody(response, operation));
        if (!page.ok) throw invalidResponse(operation, response, page.problem);
        return page.value;
      });
    },

    async cancelRun(runId, cancelOptions = {}) {
      if (typeof runId !== "string" || runId === "")
        throw new TypeError("cancelRun requires a run id");
      const { signal } = cancelOptions;
      const url = new URL(`runs/${encodeURIComponent(runId)}/cancel`, server);
      const operation = `cancel of run ${runId} at ${url.href}`;
      const response = await send(
        url.href,
        { method: "POST", headers: headers(), ...(signal === undefined ? {} : { signal }) },
        operation,
      );
      if (response.status !== 200 && response.status !== 202) {
        throw await refusal(response, operation);
      }
      const answer = parseWire(CancelAnswerSchema, await readBody(response, operation));
      if (!answer.ok) throw invalidResponse(operation, response, answer.problem);
      const { cancel_requested, ...record }: CancelAnswer = answer.value;
      return { record, cancelRequested: cancel_requested === true };
    },

    async waitForRun(runId, waitOptions = {}) {
      const timeoutMs = nonNegative("timeoutMs", waitOptions.timeoutMs ?? DEFAULT_WAIT_TIMEOUT_MS);
      let interval = nonNegative(
        "pollIntervalMs",
        waitOptions.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS,
      );
      const maxInterval = Math.max(
        interval,
        nonNegative(
          "maxPollIntervalMs",
          waitOptions.maxPollIntervalMs ?? DEFAULT_MAX_POLL_INTERVAL_MS,
        ),
      );
      const { signal } = waitOptions;
      const deadline = Date.now() + timeoutMs;
      let last: RunRecord | undefined;
      let lastError: unknown;
      for (;;) {
        signal?.throwIfAborted();
        const remaining = deadline - Date.now();
        if (remaining <= 0) throw new RunWaitTimeoutError(runId, timeoutMs, last, lastError);
        const timeout = AbortSignal.timeout(remaining);
        const pollSignal = signal === undefined ? timeout : AbortSignal.any([signal, timeout]);
        let delay = interval;
        try {
          // One request per poll: the polling loop is the retry, bounded by the deadline. The
          // server holds each poll until the run finishes (long-poll); between polls the client
          // still waits the interval, so an older server that answers at once is not hammered.
          const record = await client.getRun(runId, {
            signal: pollSignal,
            retries: 0,
            waitMs: Math.min(LONG_POLL_MS, Math.max(0, remaining - 1000)),
          });
          last = record;
          lastError = undefined;
          waitOptions.onStatus?.(record);
          if (isFinished(record.status)) return record;
        } catch (error) {
          if (signal?.aborted) throw signal.reason;
          if (timeout.aborted) throw new RunWaitTimeoutError(runId, timeoutMs, last, error);
          if (!isUploadError(error) || !error.retryable) throw error;
          lastError = error;
          delay = Math.max(delay, error.retryAfterMs ?? 0);
        }
        await sleep(Math.max(0, Math.min(delay, deadline - Date.now())), signal);
        interval = Math.min(maxInterval, Math.round(interval * 1.5));
      }
    },
  };
  return client;
}

interface Deadline {
  readonly signal: AbortSignal;
  arm(ms: number): void;
  clear(): void;
  lastMs(): number;
}

/** An abort signal that fires `ms` after the last `arm`. */
function createDeadline(ms: number): Deadline {
  const controller = new AbortController();
  let timer: ReturnType<typeof setTimeout> | undefined;
  let last = ms;
  const arm = (next: number) => {
    if (timer !== undefined) clearTimeout(timer);
    last = next;
    timer = setTimeout(() => controller.abort(new Error(`timed out after ${next} ms`)), next);
    // A request in flight keeps the process alive by its socket; the timer that bounds it must
    // not, or a deadline a failed request never cleared holds the process for its whole length.
    timer.unref?.();
  };
  arm(ms);
  return {
    signal: controller.signal,
    arm,
    clear: () => {
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
    },
    lastMs: () => last,
  };
}

/**
 * The packed body as a web stream that re-arms `deadline` with `requestMs` for every chunk the
 * server reads, and once more after the last: the answer must come within that too.
 */
function pacedBody(
  stream: AsyncIterable<Uint8Array>,
  deadline: Deadline,
  requestMs: number,
): ReadableStream<Uint8Array> {
  const iterator = stream[Symbol.asyncIterator]();
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        deadline.arm(requestMs);
        const { value, done } = await iterator.next();
        if (done) {
          deadline.arm(requestMs);
          controller.close();
          return;
        }
        controller.enqueue(value);
      },
      async cancel(reason) {
        await iterator.return?.(reason);
      },
    },
    // Pull only when fetch reads: until then the connect timeout runs.
    { highWaterMark: 0 },
  );
}

/** The server URL as a base for relative references: http(s), ending in `/`. */
function baseUrl(server: string | URL): URL {
  let url: URL;
  try {
    url = new URL(server);
  } catch {
    throw new TypeError(
      `upload server must be an absolute http or https URL, got ${JSON.stringify(String(server))}`,
    );
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new TypeError(
      `upload server must be an http or https URL, got ${JSON.stringify(url.href)}`,
    );
  }
  if (url.search !== "" || url.hash !== "") {
    throw new TypeError(
      `upload server URL must have no query or fragment, got ${JSON.stringify(url.href)}`,
    );
  }
  if (!url.pathname.endsWith("/")) url.pathname = `${url.pathname}/`;
  return url;
}

/** Reads at most `limit` bytes of a body as UTF-8, failing beyond. */
async function boundedText(response: Response, limit: number): Promise<string> {
  if (response.body === null) return "";
  const decoder = new TextDecoder();
  let text = "";
  let size = 0;
  for await (const chunk of response.body as AsyncIterable<Uint8Array>) {
    size += chunk.byteLength;
    if (size > limit) {
      await response.body.cancel().catch(() => {});
      throw new UploadError(`the server's answer is larger than ${limit} bytes`, {
        status: response.status,
        code: "invalid_response",
      });
    }
    text += decoder.decode(chunk, { stream: true });
  }
  return text + decoder.decode();
}

/** `fetch failed` says nothing; its cause names the socket error (ECONNREFUSED, ECONNRESET, ...). */
function networkDetail(error: unknown): string {
  const parts: string[] = [];
  for (let current = error; current instanceof Error && parts.length < 4; current = current.cause) {
    const code = (current as { code?: unknown }).code;
    const text =
      typeof code === "string" && !current.message.includes(code)
        ? `${code} ${current.message}`
        : current.message;
    if (!parts.includes(text)) parts.push(text);
  }
  return parts.length === 0 ? String(error) : parts.join(": ");
}

function isAbort(error: unknown): boolean {
  return error instanceof Error && (error.name === "AbortError" || error.name === "TimeoutError");
}

function nonNegative(name: string, value: number): number {
  if (!Number.isFinite(value) || value < 0) {
    throw new RangeError(`${name} must be a non-negative number, got ${value}`);
  }
  return value;
}

function plural(count: number, word: string): string {
  return `${count} ${word}${count === 1 ? "" : "s"}`;
}
