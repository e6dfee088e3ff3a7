// The store contract and its records are `@distributor/upload-store`'s; the interface a store
// passed to `createUploadServer` implements is offered here too.
export type { UploadStore } from "@distributor/upload-store";
export { authenticate, resolveUploadTokens } from "./auth.js";
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
export type { RunActionSummary, RunSummary } from "./summary.js";
export type { ResolvedToken } from "./token.js";
