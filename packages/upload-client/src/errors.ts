import type { RunRecord } from "./records.js";

/** Codes the client uses for failures that carry no server code. */
export type ClientErrorCode =
  /** The server could not be reached, or the connection broke before an answer arrived. */
  | "connection_failed"
  /** No answer within the client's connect or request timeout. */
  | "timeout"
  /** The server answered with something that is not the docs/integrations/http-upload.md protocol. */
  | "invalid_response";

export interface UploadErrorOptions {
  /** HTTP status of the answer; undefined when no answer arrived. */
  status?: number | undefined;
  /** The server's `error.code`, or a client code (`connection_failed`, `invalid_response`, `http_<status>`). */
  code: string;
  /** The server's `error.message`, when it sent one. */
  serverMessage?: string | undefined;
  /** What `Retry-After` asked for, in milliseconds. */
  retryAfterMs?: number | undefined;
  /** Requests made before giving up (1 when the failure was not retried). */
  attempts?: number;
  /** Whether the client may try again (503, connection failures, ...). */
  retryable?: boolean;
  cause?: unknown;
}

/**
 * A request to the upload server failed: the server refused it (`status` and the server's `code`
 * and message), or no usable answer arrived. `message` names the operation and the URL.
 */
export class UploadError extends Error {
  override name = "UploadError";
  readonly status: number | undefined;
  readonly code: string;
  readonly serverMessage: string | undefined;
  readonly retryAfterMs: number | undefined;
  readonly attempts: number;
  readonly retryable: boolean;

  constructor(message: string, options: UploadErrorOptions) {
    super(message, { cause: options.cause });
    this.status = options.status;
    this.code = options.code;
    this.serverMessage = options.serverMessage;
    this.retryAfterMs = options.retryAfterMs;
    this.attempts = options.attempts ?? 1;
    this.retryable = options.retryable ?? false;
  }

  /** The same failure after `attempts` requests, with the message saying so. */
  afterAttempts(attempts: number, note: string): UploadError {
    return new UploadError(`${this.message} (${note})`, {
      status: this.status,
      code: this.code,
      serverMessage: this.serverMessage,
      retryAfterMs: this.retryAfterMs,
      attempts,
      retryable: this.retryable,
      cause: this.cause,
    });
  }
}

export function isUploadError(error: unknown): error is UploadError {
  return error instanceof Error && error.name === "UploadError";
}

/** `waitForRun` gave up before the run finished. */
export class RunWaitTimeoutError extends Error {
  override name = "RunWaitTimeoutError";
  readonly code = "wait_timeout";
  readonly runId: string;
  readonly timeoutMs: number;
  /** The last status record received, when any arrived. */
  readonly lastRecord: RunRecord | undefined;

  constructor(
    runId: string,
    timeoutMs: number,
    lastRecord: RunRecord | undefined,
    cause?: unknown,
  ) {
    const status = lastRecord === undefined ? "unknown" : lastRecord.status;
    super(
      `run ${runId} did not finish within ${formatMs(timeoutMs)} (last status: ${status})`,
      cause === undefined ? undefined : { cause },
    );
    this.runId = runId;
    this.timeoutMs = timeoutMs;
    this.lastRecord = lastRecord;
  }
}

export function formatMs(ms: number): string {
  if (ms < 1000) return `${ms}ms`;
  const seconds = ms / 1000;
  return Number.isInteger(seconds) ? `${seconds}s` : `${seconds.toFixed(1)}s`;
}
