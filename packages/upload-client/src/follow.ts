import { isUploadError, RunWaitTimeoutError } from "./errors.js";
import {
  DEFAULT_MAX_POLL_INTERVAL_MS,
  DEFAULT_POLL_INTERVAL_MS,
  DEFAULT_WAIT_TIMEOUT_MS,
  LONG_POLL_MS,
  type UploadClient,
  type WaitForRunOptions,
} from "./options.js";
import { sleep } from "./retry.js";
import { isFinished, type RunRecord } from "./wire.js";

/** Polls the run with `getRun` until it has finished (`UploadClient.waitForRun`). */
export async function waitForRun(
  getRun: UploadClient["getRun"],
  runId: string,
  waitOptions: WaitForRunOptions = {},
): Promise<RunRecord> {
  const timeoutMs = nonNegative("timeoutMs", waitOptions.timeoutMs ?? DEFAULT_WAIT_TIMEOUT_MS);
  let interval = nonNegative(
    "pollIntervalMs",
    waitOptions.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS,
  );
  const maxInterval = Math.max(
    interval,
    nonNegative("maxPollIntervalMs", waitOptions.maxPollIntervalMs ?? DEFAULT_MAX_POLL_INTERVAL_MS),
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
      const record = await getRun(runId, {
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
}

function nonNegative(name: string, value: number): number {
  if (!Number.isFinite(value) || value < 0) {
    throw new RangeError(`${name} must be a non-negative number, got ${value}`);
  }
  return value;
}
