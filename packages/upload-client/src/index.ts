export { SigningError, type SignOptions } from "@distributor/bundle";
export { createUploadClient, RESUMABLE_THRESHOLD_BYTES } from "./client.js";
export {
  type ClientErrorCode,
  isUploadError,
  RunWaitTimeoutError,
  UploadError,
  type UploadErrorOptions,
} from "./errors.js";
export { generateIdempotencyKey, idempotencyKeyProblem } from "./idempotency.js";
export {
  type CancelledRun,
  type CancelRunOptions,
  type ClientTimeouts,
  DEFAULT_MAX_POLL_INTERVAL_MS,
  DEFAULT_POLL_INTERVAL_MS,
  DEFAULT_TIMEOUTS,
  DEFAULT_WAIT_TIMEOUT_MS,
  type GetRunOptions,
  type ListRunsOptions,
  LONG_POLL_MS,
  type UploadClient,
  type UploadClientOptions,
  type UploadOptions,
  type UploadProgress,
  type UploadValidationOptions,
  type WaitForRunOptions,
} from "./options.js";
export type { AcceptedUpload } from "./records.js";
export {
  DEFAULT_RETRY_POLICY,
  parseRetryAfter,
  type RetryNotice,
  type RetryPolicy,
  retryDelay,
} from "./retry.js";
// The wire records of the upload API; `@distributor/upload-client/wire` has them alone too.
export {
  type AcceptedBody,
  AcceptedBodySchema,
  type CancelAnswer,
  CancelAnswerSchema,
  type ErrorBody,
  ErrorBodySchema,
  type ErrorDetail,
  ErrorDetailSchema,
  type HealthBody,
  HealthBodySchema,
  isFinished,
  type ManifestIdentity,
  ManifestIdentitySchema,
  parseWire,
  RUN_STATUSES,
  type RunActionSummary,
  RunActionSummarySchema,
  type RunPage,
  RunPageSchema,
  type RunRecord,
  RunRecordSchema,
  type RunStatus,
  RunStatusSchema,
  type RunSummary,
  RunSummarySchema,
  type WireSchema,
} from "./wire.js";
