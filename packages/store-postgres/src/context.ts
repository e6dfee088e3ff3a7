import type { Database } from "./database.js";
import type { PostgresUploadStoreOptions } from "./options.js";

/** What the store's modules share: made once by `openPostgresUploadStore`. */
export interface StoreContext {
  readonly options: PostgresUploadStoreOptions;
  readonly db: Database;
  /** The schema's name, and quoted for SQL. */
  readonly schema: string;
  readonly s: string;
  /** This instance's name in `upload_instances` and in its claims. */
  readonly me: string;
  /** SQL: true when the instance named by `column` holds a claim that is still good. */
  alive(column: string): string;
  /** True once `close` was called: waits and polls end. */
  isClosed(): boolean;
}

/** How often a request waiting for another instance's key, or a long-poll, looks again. */
export const POLL_MS = 100;
