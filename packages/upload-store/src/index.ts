// The contract an upload store of `distributor serve` keeps: the interface, its records and its
// errors. The server's embedded and memory stores and `@distributor/store-postgres` implement it;
// `./testing` holds the suite every store passes, `./wire` the HTTP API's records.
export { storeUnavailable, UploadStoreError } from "./errors.js";
export type {
  AcceptedUpload,
  IdempotencyScope,
  KeyClaim,
  ManifestIdentity,
  RunPage,
  RunQuery,
  StoredRun,
  StoreLimits,
  UploadJob,
  UploadRunRecord,
  UploadRunStatus,
  UploadStore,
} from "./store.js";
