import type { IncomingMessage } from "node:http";
import type { Config, PipelineConfig } from "@distributor/publish";
import type { UploadStore } from "@distributor/upload-store";
import type { UploadServerEvent } from "./events.js";
import type { ServerMetrics } from "./metrics.js";
import type { PartialStore } from "./resumable/partial-store.js";
import type { UploadServerOptions } from "./server-options.js";
import type { StagingArea } from "./staging/staging-area.js";
import type { ResolvedToken } from "./token.js";
import type { Workers } from "./workers.js";

/**
 * What one server's routes, runs and recovery share: made once by `createUploadServer` and
 * handed to each module, so no module holds state of its own.
 */
export interface ServerContext {
  readonly options: UploadServerOptions;
  readonly config: Config;
  /** The pipelines with an `http_upload` source. */
  readonly uploadPipelines: readonly PipelineConfig[];
  readonly tokens: readonly ResolvedToken[];
  readonly stagingArea: StagingArea;
  readonly store: UploadStore;
  readonly workers: Workers;
  readonly metrics: ServerMetrics;
  /** Running runs' controllers, by run id: a cancel aborts at the run's next safe point. */
  readonly runControls: Map<string, AbortController>;
  /** Cancels asked for while a run was between the queue and its start. */
  readonly cancelRequests: Set<string>;
  /**
   * Resumable uploads: this process's name in partial locks, and the requests of this process
   * writing a partial now (a resume of the same upload stops the one whose producer went away).
   */
  readonly resumable: {
    /** Where partial uploads live: the staging directory, or the S3 staging prefix. */
    readonly partials: PartialStore;
    readonly instanceId: string;
    readonly holders: Map<string, { request: IncomingMessage; released: Promise<void> }>;
  };
  /** Ends long-polls when the server shuts down. */
  readonly stopping: AbortController;
  /** Set once `close` was called: new requests are refused from then on. */
  closing: Promise<void> | undefined;
  now(): Date;
  emit(event: UploadServerEvent): void;
}

/** What a request's log line learns while the request is handled. */
export type RequestLog = {
  token_id: string | null;
  pipeline_id: string | null;
  run_id: string | null;
  replayed: boolean;
  received_bytes: number;
  /** The request is an upload's answer (single request, or the PATCH completing a resumable one). */
  counts_upload: boolean;
};

/** `Retry-After` of the refusals a producer should retry (full queue, shutdown, store away). */
export const RETRY_AFTER_SECONDS = "5";
