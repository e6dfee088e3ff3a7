import { S3Client, type S3ClientConfig } from "@aws-sdk/client-s3";

export interface S3Credentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

/** How long connecting to the service may take before the attempt fails (`connectTimeoutMs`). */
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
/**
 * How long one request may go without an answer or progress (no byte sent or received) before
 * it fails (`requestTimeoutMs`).
 */
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;

export interface ClientOptions {
  region: string;
  endpoint?: string | undefined;
  forcePathStyle: boolean;
  credentials?: S3Credentials | undefined;
  maxAttempts: number;
  connectTimeoutMs: number;
  requestTimeoutMs: number;
}

/**
 * One SDK client per backend. Checksums only where the API requires them: SDK releases since 2025
 * add CRC checksums to every upload by default, which several S3-compatible stores reject.
 * Retries use the SDK's adaptive mode (client-side rate limiting on throttling) with a bound,
 * except after a timeout (`retriesWithinTimeouts`).
 *
 * Timeouts go to the SDK's `NodeHttpHandler` (given as its options): `connectionTimeout` bounds
 * the TCP/TLS connect, and `socketTimeout` the time a request's socket may stay idle, sending
 * nothing and receiving nothing, whether the request body is still going out, the answer is
 * awaited or a response body stalls. The handler's own `requestTimeout` is a deadline for the
 * whole request up to the answer's headers, which a large part upload on a slow link can
 * legitimately exceed while making progress, so it stays off.
 */
export function createClient(options: ClientOptions): S3Client {
  const config: S3ClientConfig = {
    region: options.region,
    forcePathStyle: options.forcePathStyle,
    requestChecksumCalculation: "WHEN_REQUIRED",
    responseChecksumValidation: "WHEN_REQUIRED",
    retryStrategy: retriesWithinTimeouts(options.maxAttempts),
    requestHandler: {
      connectionTimeout: options.connectTimeoutMs,
      socketTimeout: options.requestTimeoutMs,
    },
  };
  if (options.endpoint !== undefined) config.endpoint = options.endpoint;
  // Both or neither: without explicit credentials the SDK's default chain (environment, profile,
  // instance role, ...) applies.
  if (options.credentials !== undefined) config.credentials = options.credentials;
  return new S3Client(config);
}

/** The SDK's retry strategy interface (`RetryStrategyV2` of `@smithy/types`), as used here. */
interface RetryToken {
  getRetryCount(): number;
  getRetryDelay(): number;
}
interface RetryStrategy {
  acquireInitialRetryToken(scope: string): Promise<RetryToken>;
  refreshRetryTokenForRetry(token: RetryToken, info: { error?: unknown }): Promise<RetryToken>;
  recordSuccess(token: RetryToken): void;
}

/**
 * The SDK's adaptive retry strategy, except that a request that timed out is not tried again: a
 * hung service would otherwise hold a call for `maxAttempts` timeouts and the backoffs between
 * them (about 100 s with the defaults), while the configured `timeouts.request` promises 30 s.
 * Refusing the retry makes the SDK throw the timeout as it came; resets, 5xx answers and
 * throttling are still retried. The adaptive strategy comes from a client built for that alone
 * (it is not a public export of the SDK), once per backend.
 */
function retriesWithinTimeouts(maxAttempts: number): RetryStrategy {
  let inner: RetryStrategy | undefined;
  let resolving: Promise<RetryStrategy> | undefined;
  const adaptive = () => {
    resolving ??= (async () => {
      const probe = new S3Client({ region: "us-east-1", retryMode: "adaptive", maxAttempts });
      try {
        inner = (await probe.config.retryStrategy()) as unknown as RetryStrategy;
        return inner;
      } finally {
        probe.destroy();
      }
    })();
    return resolving;
  };
  return {
    async acquireInitialRetryToken(scope) {
      return (await adaptive()).acquireInitialRetryToken(scope);
    },
    async refreshRetryTokenForRetry(token, info) {
      if (isTimeout(info.error)) throw info.error;
      return (await adaptive()).refreshRetryTokenForRetry(token, info);
    },
    recordSuccess(token) {
      inner?.recordSuccess(token);
    },
  };
}

function isTimeout(error: unknown): boolean {
  if (typeof error !== "object" || error === null) return false;
  const { name, code } = error as { name?: unknown; code?: unknown };
  // The HTTP handler names resets `TimeoutError` too, but keeps their code: those are retried.
  if (code === "ECONNRESET" || code === "EPIPE") return false;
  return name === "TimeoutError" || code === "ETIMEDOUT";
}
