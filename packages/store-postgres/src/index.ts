export { openConfiguredPostgresStore } from "./configured.js";
export {
  DEFAULT_CLAIM_TIMEOUT_MS,
  openPostgresUploadStore,
  type PostgresUploadStoreOptions,
} from "./store.js";
