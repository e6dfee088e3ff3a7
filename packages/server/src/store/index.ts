// Entry of the `@distributor/server/store` subpath: what an upload store implements, for stores
// kept outside this package (`@distributor/store-postgres`).
export { UploadStoreError } from "./errors.js";
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
} from "./store.js";
export type { StoreLimits } from "./store-core.js";
