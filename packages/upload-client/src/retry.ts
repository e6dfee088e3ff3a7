import type { UploadError } from "./errors.js";
import { formatMs, isUploadError } from "./errors.js";

export interface RetryNotice {
  /** The attempt that failed (1 for the first request). */
  attempt: number;
  delayMs: number;
  error: UploadError;
}

/** How often and how long a request is retried after a 503 or a broken connection. */
export interface RetryPolicy {
  /** Most requests in all, the first included; default 5. 1 disables retries. */
  attempts: number;
  /** First backoff delay; doubled per attempt; default 500 ms. */
  baseDelayMs: number;
  /** Largest backoff delay (a longer `Retry-After` is still honoured); default 30 s. */
  maxDelayMs: number;
  /** No retry starts later than this after the first request; default 2 minutes. */
  maxElapsedMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = {
  attempts: 5,
  baseDelayMs: 500,
  maxDelayMs: 30_000,
  maxElapsedMs: 120_000,
};

/** Fills a partial policy (or an attempt count) from the defaults and checks it. */
export function retryPolicy(
  given: Partial<RetryPolicy> | number | undefined,
  base: RetryPolicy = DEFAULT_RETRY_POLICY,
): RetryPolicy {
  const partial = typeof given === "number" ? { attempts: given + 1 } : (given ?? {});
  const policy = { ...base, ...partial };
  for (const [key, minimum] of [
    ["attempts", 1],
    ["baseDelayMs", 0],
    ["maxDelayMs", 0],
    ["maxElapsedMs", 0],
  ] as const) {
    const value = policy[key];
    if (!Number.isSafeInteger(value) || value < minimum) {
      throw new RangeError(`retry ${key} must be an integer of at least ${minimum}, got ${value}`);
    }
  }
  return policy;
}

/**
 * Delay before retry number `retry` (1 for the first retry): exponential backoff with "equal
 * jitter" (half fixed, half random, so concurrent producers spread out), at least what the
 * server's `Retry-After` asked for.
 */
export function retryDelay(
  retry: number,
  retryAfterMs: number | undefined,
  policy: RetryPolicy,
  random: () => number = Math.random,
): number {
  const exponential = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (retry - 1));
  const backoff = Math.round(exponential / 2 + random() * (exponential / 2));
  return Math.max(backoff, retryAfterMs ?? 0);
}

/**
 * `Retry-After` in milliseconds: delay-seconds or an HTTP date (RFC 9110 §10.2.3); undefined when
 * absent or unreadable. A date in the past means "now".
 */
export function parseRetryAfter(
  value: string | null,
  now: number = Date.now(),
): number | undefined {
  if (value === null) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  if (!/[a-z]/i.test(text)) return undefined;
  const date = Date.parse(text);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, date - now);
}

/** Waits `ms`, rejecting with the signal's reason as soon as it is aborted. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Runs `attempt` until it succeeds, fails for good, or the policy's attempts or time run out;
 * between attempts it waits the backoff (or the server's `Retry-After`).
 */
export async function withRetries<T>(
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

function plural(count: number, word: string): string {
  return `${count} ${word}${count === 1 ? "" : "s"}`;
}
