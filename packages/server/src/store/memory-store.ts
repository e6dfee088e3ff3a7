import type { StoreLimits, UploadStore } from "@distributor/upload-store";
import { createUploadStoreCore } from "./store-core.js";

export interface MemoryUploadStoreOptions extends Partial<Pick<StoreLimits, "maxRuns">> {
  /** `server.http.queue_size`: queued jobs and reserved places together. */
  queueSize: number;
  /** `server.http.retention` in milliseconds. */
  retentionMs: number;
}

/** Default of `server.store.max_runs`. */
export const DEFAULT_MAX_RUNS = 10_000;

/** A store in memory only: everything is forgotten when the process exits (for tests and embedding). */
export function createMemoryUploadStore(options: MemoryUploadStoreOptions): UploadStore {
  return createUploadStoreCore(
    { maxRuns: DEFAULT_MAX_RUNS, ...options },
    {
      durable: false,
      writeRun: async () => undefined,
      removeRun: async () => undefined,
      writeKey: async () => undefined,
      removeKey: async () => undefined,
      close: async () => undefined,
    },
  );
}
