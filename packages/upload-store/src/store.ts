import type { AcceptedBody, ManifestIdentity, RunPage, RunRecord, RunStatus } from "./wire.js";

// The records the server answers with are the wire records of `@distributor/upload-client/wire`:
// one definition for the server and its clients.

/** The lifecycle of an uploaded bundle's run (docs/integrations/http-upload.md). */
export type UploadRunStatus = RunStatus;

/** What identifies an uploaded bundle for idempotency: its manifest's id, digest and creation time. */
export type { ManifestIdentity, RunPage };

/** The `202` body of an accepted upload, replayed as it was for a retry with the same key. */
export type AcceptedUpload = AcceptedBody;

/**
 * The status record of one upload's run, as `GET /runs/{run_id}` returns it; `result` is the
 * bounded summary (`RunSummary`) of the run workflow's report once the run has finished.
 */
export type UploadRunRecord = RunRecord;

/** A stored run record and who may read it. */
export interface StoredRun {
  record: UploadRunRecord;
  /** The upload token whose upload created the run; only it may read the status. */
  tokenId: string;
}

/** The scope of an idempotency key: the same key of another token or pipeline is another key. */
export interface IdempotencyScope {
  tokenId: string;
  pipelineId: string;
  key: string;
}

/**
 * The result of claiming an idempotency key: the caller now holds it; another request holds it
 * while it stages (wait for `settled`, then claim again); or it belongs to an accepted upload,
 * with the digest of the pipeline configuration that accepted it (the job's `configDigest`;
 * absent for keys bound by an earlier version).
 */
export type KeyClaim =
  | { kind: "claimed" }
  | { kind: "pending"; settled: Promise<void> }
  | { kind: "accepted"; accepted: AcceptedUpload; configDigest?: string };

/** A queued run: the staged bundle waiting for a worker. */
export interface UploadJob {
  runId: string;
  pipelineId: string;
  /** The upload's own staging directory: the run's source root, removed after the run. */
  stagingDirectory: string;
  /** The bundle directory inside it (absolute). */
  bundleDirectory: string;
  /**
   * Digest of the pipeline's configuration the upload was accepted under
   * (`pipelineConfigDigest`): a run whose pipeline is configured otherwise when it starts fails
   * `config_changed` instead of publishing where it was never accepted for. Absent in jobs
   * accepted by an earlier version: those run under the configuration in force.
   */
  configDigest?: string;
  /**
   * Bytes of the accepted upload's files in staging (`distributor_staging_bytes` is their sum
   * over live jobs). Absent in jobs accepted by an earlier version: those count as none.
   */
  stagedBytes?: number;
  /**
   * Set by a shared store's `takeNext` when the run was claimed by an instance whose claim had
   * lapsed: this instance takes it over. Never stored.
   */
  takenOver?: boolean;
}

/** A page of `GET /runs`: which of a token's runs to list, newest first. */
export interface RunQuery {
  tokenId: string;
  pipelineId?: string;
  status?: UploadRunStatus;
  limit: number;
  /** The `next_cursor` of the previous page. */
  cursor?: string;
}

/**
 * Where the upload server keeps run status, idempotency records and the queue. The HTTP layer and
 * the workers use nothing else, so the in-memory store, the embedded durable one and a shared one
 * are interchangeable; `describeUploadStoreContract` (./testing) is what each must pass.
 */
export interface UploadStore {
  /** True when accepted runs survive a restart; the server then syncs staged bundles to disk. */
  readonly durable: boolean;
  /**
   * Set by a store that several `serve` instances share: jobs appear in it without a call on this
   * process (another instance's upload, a run taken over from an instance that died), so the
   * server asks `takeNext` this often. Its queue is everyone's: at shutdown an instance finishes
   * its own runs and leaves the queue to the others.
   */
  readonly pollIntervalMs?: number;
  /**
   * Called once before serving: a run left `running` by a stopped process is queued again (the
   * commit protocol makes a repeat safe). Returns every live run's job, queued in acceptance order.
   * A shared store queues again only what this instance held before; runs of an instance that
   * died are taken over by `takeNext` once its claim timed out.
   */
  recover(): Promise<UploadJob[]>;
  /** Claims `scope` for a request that is about to stage an upload. */
  claimKey(scope: IdempotencyScope): Promise<KeyClaim>;
  /** Gives a claimed key up (the upload was refused); waiting requests may claim it. */
  releaseKey(scope: IdempotencyScope): Promise<void>;
  /**
   * Reserves one of the queue's places for an upload about to stage; false when the queue is
   * full. The place is given back with `releaseQueueSlot` or used by `enqueue`.
   */
  reserveQueueSlot(): Promise<boolean>;
  releaseQueueSlot(): Promise<void>;
  /**
   * Stores the run's record, queues its job in the reserved place and, when `scope` is given,
   * binds the claimed key to `accepted` and the job's `configDigest` (it then expires with the
   * record). Once it resolves the
   * upload is accepted: a durable store has it on disk.
   */
  enqueue(
    run: StoredRun,
    job: UploadJob,
    accepted: AcceptedUpload,
    scope: IdempotencyScope | undefined,
  ): Promise<void>;
  /**
   * Removes and returns the oldest queued job whose pipeline is not in `busyPipelines` (nor, for a
   * shared store, running on another instance).
   */
  takeNext(busyPipelines: ReadonlySet<string>): Promise<UploadJob | undefined>;
  /** Takes a queued run's job out of the queue (to cancel it); undefined when it is not queued. */
  dequeue(runId: string): Promise<UploadJob | undefined>;
  /** Number of queued jobs plus reserved places. */
  queueLength(): Promise<number>;
  /**
   * The `stagedBytes` of every live run's job (accepted, queued or running), summed: what waits
   * in staging, whichever instance accepted or runs it. A finished run's job no longer counts.
   */
  stagedBytes(): Promise<number>;
  getRun(runId: string): Promise<StoredRun | undefined>;
  /**
   * Changes a run's record; a finished status also drops its job (the run is no longer live).
   * Resolves false when the change was not recorded: the run is unknown, or (shared stores) this
   * instance's claim on it was taken over by another — then every later change this instance
   * makes to that run is refused too, and the run is no longer this instance's to carry out.
   */
  updateRun(runId: string, change: Partial<UploadRunRecord>): Promise<boolean>;
  /**
   * Shared stores: records that a live run held by another instance was asked to stop, so that
   * instance can stop it at its next safe point.
   */
  requestCancel?(runId: string, reason: string): Promise<void>;
  /** Shared stores: which of `runIds` were asked to stop, with the reason given. */
  cancelRequests?(runIds: readonly string[]): Promise<Map<string, string>>;
  /** Resolves when the run's record changes next, or after `timeoutMs`. */
  watchRun(runId: string, timeoutMs: number, signal?: AbortSignal): Promise<void>;
  /** One page of a token's runs, newest first. */
  listRuns(query: RunQuery): Promise<RunPage>;
  /**
   * Forgets finished runs whose `finished_at` is the retention or more before `now`, and beyond
   * the maximum count the oldest finished ones; their keys go with them. Live runs stay.
   */
  expire(now: Date): Promise<void>;
  /** Number of run records held, live and finished. */
  size(): Promise<number>;
  /**
   * What `GET /readyz` reports of the store: `ok`, or what keeps it from doing its work now (a
   * session of the database that holds a lock the store needs, say); it throws when the store
   * cannot be reached. A store without it is ready when it can read its queue's length.
   */
  readiness?(): Promise<string>;
  close(): Promise<void>;
}

/** Bounds every store applies to the records it holds (docs/integrations/http-upload.md, durability). */
export interface StoreLimits {
  /** `server.http.queue_size`: queued jobs and reserved places together. */
  queueSize: number;
  /** `server.http.retention` in milliseconds. */
  retentionMs: number;
  /** `server.store.max_runs`: finished run records kept at most; the oldest go first. */
  maxRuns: number;
}
