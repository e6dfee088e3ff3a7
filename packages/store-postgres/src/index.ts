export {
  DEFAULT_CLAIM_TIMEOUT_MS,
  openPostgresUploadStore,
  type PostgresUploadStoreOptions,
} from "./store.js";
