import type { Config, WorkflowOptions } from "@distributor/publish";
import type { UploadStore } from "@distributor/upload-store";
import type { UploadServerEvent } from "./events.js";

/** What `createUploadServer` is given. */
export interface UploadServerOptions extends WorkflowOptions<UploadServerEvent> {
  config: Config;
  /**
   * Where status, idempotency records and the queue live (default: `server.store`, the embedded
   * durable store). A store given here is not closed by the server.
   */
  store?: UploadStore;
  /** Where token references resolve (default `process.env`). */
  env?: NodeJS.ProcessEnv;
  /**
   * How long a run waits for another run's lease on a shared destination root (default 10
   * minutes): runs of different pipelines that share a root queue behind each other.
   */
  lockTimeoutMs?: number;
  /** Recorded as `distributor_version` in written state. */
  distributorVersion?: string;
}
