export { authenticate, type ResolvedToken, resolveUploadTokens } from "./auth.js";
export { HttpError } from "./http-error.js";
export { createMemoryUploadStore, type MemoryUploadStoreOptions } from "./memory-store.js";
export {
  createUploadServer,
  parseListen,
  type UploadServer,
  type UploadServerAddress,
  type UploadServerEvent,
  type UploadServerOptions,
} from "./server.js";
export { extractionLimits } from "./staging.js";
export type {
  AcceptedUpload,
  IdempotencyScope,
  KeyClaim,
  ManifestIdentity,
  StoredRun,
  UploadJob,
  UploadRunRecord,
  UploadRunStatus,
  UploadStore,
} from "./store.js";
