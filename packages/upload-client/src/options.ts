import type { SignOptions, ValidateBundleOptions } from "@distributor/bundle";
import type { AcceptedUpload } from "./records.js";
import type { RetryNotice, RetryPolicy } from "./retry.js";
import type { RunPage, RunRecord, RunStatus } from "./wire.js";

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

/**
 * What an upload validates locally: the pipeline's `validation` block, where it is not the
 * default. `maxFiles` (default 10000) is the most files this client sends: set it to what the
 * server's pipeline accepts (its `validation.max_files`) to send more. `maxFilesSetting` says how
 * a refusal names it (default `validation.maxFiles` of the upload).
 */
export type UploadValidationOptions = Pick<
  ValidateBundleOptions,
  "unlistedFiles" | "maxFiles" | "maxTotalSize" | "maxFilesSetting"
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
  /**
   * Send the archive resumably (tus 1.0): a broken connection, a restart of the server or of
   * this producer (with the same `idempotencyKey`) resumes from what the server holds. `"auto"`
   * (default) does so for archives of `RESUMABLE_THRESHOLD_BYTES` (4 MiB) or more, and sends
   * smaller ones in one request; `false` always sends one request, packing afresh per attempt.
   */
  resumable?: boolean | "auto";
  /** Called as the archive is sent: at each (re)start with the offset the server holds, then as bytes go. */
  onProgress?: (progress: UploadProgress) => void;
}

/** How far a resumable upload got. */
export interface UploadProgress {
  /** Bytes of the archive the server holds or that were handed to the connection. */
  offset: number;
  /** The archive's size. */
  total: number;
  /** True when an attempt starts from an offset the server already held (a resume). */
  resumed: boolean;
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
