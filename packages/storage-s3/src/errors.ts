import { StorageError, type StorageErrorKind, type StorageOperation } from "@distributor/storage";
import { backendErrors } from "@distributor/storage/adapter";

export const BACKEND_NAME = "s3";
export const s3Error = backendErrors(BACKEND_NAME);

/** What the SDK tells about a failed request, whatever shape the error has. */
export interface ServiceFailure {
  code: string;
  status: number | undefined;
  message: string;
}

export function serviceFailure(error: unknown): ServiceFailure {
  const candidate = error as {
    name?: unknown;
    Code?: unknown;
    code?: unknown;
    message?: unknown;
    $metadata?: { httpStatusCode?: unknown };
  };
  const code =
    typeof candidate?.Code === "string"
      ? candidate.Code
      : typeof candidate?.code === "string"
        ? candidate.code
        : typeof candidate?.name === "string"
          ? candidate.name
          : "Error";
  const status = candidate?.$metadata?.httpStatusCode;
  const message = typeof candidate?.message === "string" ? candidate.message : String(error);
  return { code, status: typeof status === "number" ? status : undefined, message };
}

export function statusOf(error: unknown): number | undefined {
  return serviceFailure(error).status;
}

const PERMISSION_CODES = new Set([
  "AccessDenied",
  "AllAccessDisabled",
  "AccountProblem",
  "ExpiredToken",
  "InvalidAccessKeyId",
  "InvalidToken",
  "SignatureDoesNotMatch",
  "CredentialsProviderError",
]);

const NETWORK_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ENOTFOUND",
  "EAI_AGAIN",
  "ETIMEDOUT",
  "EPIPE",
  "TimeoutError",
  "RequestTimeout",
]);

/** Where a failed request went, and the timeouts it ran under (for the message). */
export interface FailureSite {
  bucket: string;
  key: string;
  connectTimeoutMs?: number;
  requestTimeoutMs?: number;
}

/**
 * Whether the request timed out: the SDK's HTTP handler names a connect or idle timeout
 * `TimeoutError` (it also renames resets so, but keeps their `ECONNRESET`/`EPIPE` code, which
 * `serviceFailure` prefers).
 */
export function timedOut(failure: ServiceFailure): boolean {
  return failure.code === "TimeoutError" || failure.code === "ETIMEDOUT";
}

/** The storage kind of a failed request. */
export function kindOf(failure: ServiceFailure): StorageErrorKind {
  const { code, status } = failure;
  if (code === "NoSuchKey" || (code === "NotFound" && status === 404)) return "not_found";
  // A missing bucket is a configuration problem, never an absent file: it must not read as
  // "nothing published yet".
  if (code === "NoSuchBucket") return "unavailable";
  if (PERMISSION_CODES.has(code) || status === 401 || status === 403) return "permission";
  if (code === "PreconditionFailed" || status === 412) return "conflict";
  if (code === "NotImplemented" || status === 501) return "unsupported";
  if (NETWORK_CODES.has(code)) return "unavailable";
  if (status === 404) return "not_found";
  return "unavailable";
}

/**
 * Turns an SDK failure into a `StorageError` naming the operation, bucket and key. StorageErrors
 * (already decided by the adapter) pass through.
 */
export function toStorageError(
  error: unknown,
  operation: StorageOperation,
  path: string,
  where: FailureSite,
): unknown {
  if (error instanceof StorageError) return error;
  // Programming errors and aborts are not storage failures.
  if (error instanceof RangeError || error instanceof TypeError) return error;
  const failure = serviceFailure(error);
  const kind = kindOf(failure);
  return s3Error(kind, operation, path, describeFailure(failure, kind, where), error);
}

export function describeFailure(
  failure: ServiceFailure,
  kind: StorageErrorKind,
  where: FailureSite,
): string {
  const at = `s3://${where.bucket}/${where.key}`;
  const code =
    failure.status === undefined ? failure.code : `${failure.code}, HTTP ${failure.status}`;
  const said =
    failure.message && failure.message !== "UnknownError" && failure.message !== failure.code
      ? `: ${failure.message}`
      : "";
  if (timedOut(failure)) {
    const connecting = /establish a connection/.test(failure.message);
    const limit = connecting ? where.connectTimeoutMs : where.requestTimeoutMs;
    const what = connecting
      ? "no connection to the service"
      : "no answer or progress from the service";
    const within = limit === undefined ? "" : ` within ${limit} ms`;
    const option = connecting ? "timeouts.connect" : "timeouts.request";
    return `request for ${at} timed out: ${what}${within} (${option}; ${code}${said})`;
  }
  if (failure.code === "NoSuchBucket") {
    return `bucket "${where.bucket}" does not exist (${at}; ${code})`;
  }
  if (failure.code === "CredentialsProviderError") {
    return `no credentials for ${at} (${failure.message}); name them with credentials.access_key_id_env / secret_access_key_env or configure the AWS SDK's default chain`;
  }
  if (kind === "permission") {
    return `access denied for ${at} (${code}${said}); check the credentials and the bucket policy`;
  }
  if (kind === "not_found") return `not found (${at}; ${code})`;
  return `request for ${at} failed (${code}${said})`;
}

/** A service that does not implement a conditional header says so with 501 (or 400 on some). */
export function rejectsConditions(error: unknown): boolean {
  const { code, status } = serviceFailure(error);
  return status === 501 || code === "NotImplemented";
}
