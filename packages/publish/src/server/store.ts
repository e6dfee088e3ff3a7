import type { RunReport } from "../workflows/run.js";

/** The lifecycle of an uploaded bundle's run (SPEC §10). */
export type UploadRunStatus = "accepted" | "queued" | "running" | "succeeded" | "failed";

/** What identifies an uploaded bundle for idempotency: its manifest's id, digest and creation time. */
export interface ManifestIdentity {
  id: string;
  digest: string;
  created: string;
}

/** The `202` body of an accepted upload, replayed as it was for a retry with the same key. */
export interface AcceptedUpload {
  run_id: string;
  pipeline_id: string;
  status: UploadRunStatus;
  manifest: ManifestIdentity;
  status_url: string;
}

/** The status record of one upload's run, as `GET /runs/{run_id}` returns it. */
export interface UploadRunRecord {
  run_id: string;
  pipeline_id: string;
  status: UploadRunStatus;
  accepted_at: string;
  started_at: string | null;
  finished_at: string | null;
  manifest: ManifestIdentity;
  /** The run workflow's report once the run has finished. */
  result: RunReport | null;
  error: { code: string; message: string } | null;
}

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
 * while it stages (wait for `settled`, then claim again); or it belongs to an accepted upload.
 */
export type KeyClaim =
  | { kind: "claimed" }
  | { kind: "pending"; settled: Promise<void> }
  | { kind: "accepted"; accepted: AcceptedUpload };

/** A queued run: the staged bundle waiting for a worker. */
export interface UploadJob {
  runId: string;
  pipelineId: string;
  /** The upload's own staging directory: the run's source root, removed after the run. */
  stagingDirectory: string;
  /** The bundle directory inside it (absolute). */
  bundleDirectory: string;
}

/**
 * Where the upload server keeps run status, idempotency records and the queue. The HTTP layer and
 * the workers use nothing else, so a durable store can replace the in-memory one (SPEC §10: status
 * and idempotency records live in memory, and a restart forgets them).
 */
export interface UploadStore {
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
   * binds the claimed key to `accepted` (it then expires with the record).
   */
  enqueue(
    run: StoredRun,
    job: UploadJob,
    accepted: AcceptedUpload,
    scope: IdempotencyScope | undefined,
  ): Promise<void>;
  /** Removes and returns the oldest queued job whose pipeline is not in `busyPipelines`. */
  takeNext(busyPipelines: ReadonlySet<string>): Promise<UploadJob | undefined>;
  /** Number of queued jobs plus reserved places. */
  queueLength(): Promise<number>;
  getRun(runId: string): Promise<StoredRun | undefined>;
  updateRun(runId: string, change: Partial<UploadRunRecord>): Promise<void>;
  /** Forgets finished runs whose `finished_at` is `retentionMs` or more before `now`, and their keys. */
  expire(now: Date): Promise<void>;
}
