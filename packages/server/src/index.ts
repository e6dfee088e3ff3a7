export { authenticate, type ResolvedToken, resolveUploadTokens } from "./auth.js";
export { HttpError } from "./http-error.js";
export {
  createUploadServer,
  eventLevel,
  type LogLevel,
  MAX_STATUS_WAIT_MS,
  parseListen,
  type UploadServer,
  type UploadServerAddress,
  type UploadServerEvent,
  type UploadServerOptions,
} from "./server.js";
export { extractionLimits, MAX_EXPANSION_RATIO } from "./staging/staging.js";
export { SHARED_STAGING_GRACE_MS } from "./staging/staging-area.js";
export {
  type EmbeddedUploadStoreOptions,
  openEmbeddedUploadStore,
} from "./store/embedded-store.js";
export {
  createMemoryUploadStore,
  DEFAULT_MAX_RUNS,
  type MemoryUploadStoreOptions,
} from "./store/memory-store.js";
export type {
  AcceptedUpload,
  IdempotencyScope,
  KeyClaim,
  ManifestIdentity,
  RunPage,
  RunQuery,
  StoredRun,
  UploadJob,
  UploadRunRecord,
  UploadRunStatus,
  UploadStore,
} from "./store/store.js";
export type { StoreLimits } from "./store/store-core.js";
export type { RunActionSummary, RunSummary } from "./summary.js";
