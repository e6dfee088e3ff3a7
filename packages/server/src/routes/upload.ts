import type { IncomingMessage, ServerResponse } from "node:http";
import type { Readable } from "node:stream";
import type { PipelineConfig } from "@distributor/publish";
import { errorMessage, pipelineConfigDigest } from "@distributor/publish";
import type { AcceptedUpload, IdempotencyScope, UploadJob } from "@distributor/upload-store";
import { storeUnavailable } from "@distributor/upload-store";
import { authorize } from "../auth.js";
import type { RequestLog, ServerContext } from "../context.js";
import { RETRY_AFTER_SECONDS } from "../context.js";
import { HttpError, sendJson } from "../http-error.js";
import { claim, idempotencyKey, replay } from "../idempotency.js";
import { enqueue } from "../runner.js";
import {
  createUploadDirectory,
  extractUpload,
  removeUploadDirectory,
  type StagedUpload,
  stagedManifest,
  syncTree,
  validateStaged,
} from "../staging/staging.js";
import type { ResolvedToken } from "../token.js";

/** A pipeline whose source takes uploads. */
export type UploadPipeline = PipelineConfig & {
  source: Extract<PipelineConfig["source"], { backend: "http_upload" }>;
};

export const ACCEPTED_CONTENT_TYPES: ReadonlySet<string> = new Set([
  "application/x-tar",
  "application/gzip",
  "application/x-gzip",
]);

/**
 * `POST /pipelines/{id}/uploads` in one request: stages and validates the archive, and answers
 * 202 once the run is queued durably (200 for a replay of an idempotency key).
 */
export async function upload(
  ctx: ServerContext,
  request: IncomingMessage,
  response: ServerResponse,
  pipelineId: string,
  log: RequestLog,
) {
  const { token, pipeline } = uploadTarget(ctx, request, pipelineId, log);
  const key = idempotencyKey(request);
  checkContentType(request);
  const maxUploadSize = pipeline.source.maxUploadSize;
  const declared = request.headers["content-length"];
  if (declared !== undefined && Number(declared) > maxUploadSize) {
    throw new HttpError(
      413,
      "upload_too_large",
      `upload body of ${declared} bytes is larger than the pipeline's max_upload_size of ${maxUploadSize} bytes`,
    );
  }

  const { accepted, replayed } = await acceptArchive(ctx, {
    token,
    pipeline,
    key,
    body: request,
    contentType: contentTypeOf(request),
    log,
  });
  sendAccepted(response, accepted, replayed);
}

/** The request's token and the upload pipeline it names: 401, 404 or 403 otherwise. */
export function uploadTarget(
  ctx: ServerContext,
  request: IncomingMessage,
  pipelineId: string,
  log: RequestLog,
): { token: ResolvedToken; pipeline: UploadPipeline } {
  const token = authorize(ctx.tokens, request, log);
  const pipeline = ctx.uploadPipelines.find((candidate) => candidate.id === pipelineId);
  if (pipeline === undefined || pipeline.source.backend !== "http_upload") {
    throw new HttpError(
      404,
      "pipeline_not_found",
      `pipeline ${JSON.stringify(pipelineId)} not found or does not accept uploads`,
    );
  }
  log.pipeline_id = pipeline.id;
  if (!token.allowPipelines.has(pipeline.id)) {
    throw new HttpError(
      403,
      "pipeline_not_allowed",
      `token ${token.id} may not upload to pipeline ${pipeline.id}`,
    );
  }
  return { token, pipeline: pipeline as UploadPipeline };
}

/** The answer to an accepted upload: `202`, or `200` with `Idempotency-Replayed` for a replay. */
export function sendAccepted(
  response: ServerResponse,
  accepted: AcceptedUpload,
  replayed: boolean,
  headers: Record<string, string> = {},
) {
  if (replayed) {
    sendJson(response, 200, accepted, {
      ...headers,
      Location: accepted.status_url,
      "Idempotency-Replayed": "true",
    });
  } else sendJson(response, 202, accepted, { ...headers, Location: accepted.status_url });
}

/** What `acceptArchive` stages: a whole archive, from a request body or a completed partial. */
export interface ArchiveToAccept {
  token: ResolvedToken;
  pipeline: PipelineConfig;
  key: string | undefined;
  body: Readable;
  contentType: string;
  log: RequestLog;
  /**
   * Whether an upload accepted earlier under the key is known to be this one (a completed partial
   * that recorded it): then it is answered as a replay without reading the body.
   */
  knownReplay?: (earlier: AcceptedUpload) => Promise<boolean>;
  /** Runs once the key is claimed and before anything is staged (a whole-archive checksum). */
  check?: () => Promise<void>;
}

/**
 * Stages and validates an archive and queues its run durably; the accepted upload, or the one
 * accepted earlier under the same key (`replayed`). The order of the steps is what makes the
 * 202 survive a crash: docs/design/upload-service.md. A single-request upload and a completed
 * resumable one both come through here, so both promise the same.
 */
export async function acceptArchive(
  ctx: ServerContext,
  archive: ArchiveToAccept,
): Promise<{ accepted: AcceptedUpload; replayed: boolean }> {
  const { token, pipeline, key, log } = archive;
  const { config, store, stagingArea, workers, now } = ctx;
  const http = config.server.http;
  const maxUploadSize =
    pipeline.source.backend === "http_upload" ? pipeline.source.maxUploadSize : 0;
  const scope: IdempotencyScope | undefined =
    key === undefined ? undefined : { tokenId: token.id, pipelineId: pipeline.id, key };
  const earlier =
    scope === undefined ? undefined : await claim(store, scope, pipelineConfigDigest(pipeline));
  let slot = false;
  let staged: StagedUpload | undefined;
  let placed: Pick<UploadJob, "stagingDirectory" | "bundleDirectory"> | undefined;
  let enqueued = false;
  if (earlier !== undefined && (await archive.knownReplay?.(earlier))) {
    log.run_id = earlier.run_id;
    log.replayed = true;
    return { accepted: earlier, replayed: true };
  }
  try {
    await archive.check?.();
    // A replay stages its body too (its manifest must be compared), so it takes a place while
    // it does: queue_size bounds the uploads on disk, replays included.
    slot = await store.reserveQueueSlot();
    if (!slot) {
      throw new HttpError(
        503,
        "queue_full",
        `the upload queue is full (server.http.queue_size ${http.queueSize}); retry later`,
        { headers: { "Retry-After": RETRY_AFTER_SECONDS } },
      );
    }
    const directory = await createUploadDirectory(stagingArea.receiveRoot);
    staged = { directory, bundleDirectory: directory };
    staged = await extractUpload(
      archive.body,
      directory,
      pipeline,
      maxUploadSize,
      archive.contentType,
    );
    log.received_bytes = staged.receivedBytes ?? 0;

    if (earlier !== undefined) {
      replay(earlier, await stagedManifest(staged, pipeline), log);
      return { accepted: earlier, replayed: true };
    }
    const manifest = await validateStaged(staged, pipeline, { now });
    // A durable 202 promises the staged bytes too (a remote staging copy is durable once written).
    if (store.durable && !stagingArea.remote) await syncTree(staged.directory);
    placed = await stagingArea.place(staged);
    try {
      const accepted = await enqueue(
        ctx,
        token,
        pipeline,
        manifest,
        { ...placed, stagedBytes: staged.extractedBytes ?? 0 },
        scope,
      );
      enqueued = true;
      log.run_id = accepted.run_id;
      return { accepted, replayed: false };
    } catch (error) {
      // A store that went away may have committed the run before its answer was lost: the
      // placed bundle stays for that run (a retry with the key replays it); if nothing was
      // committed, it is staged data of no live run, removed at the next start.
      if (storeUnavailable(error) !== undefined) {
        if (staged.directory === placed.stagingDirectory) staged = undefined;
        placed = undefined;
      }
      throw error;
    }
  } finally {
    if (!enqueued)
      await giveBack(ctx, { staged, placed, slot, scope: earlier ? undefined : scope });
    workers.pump();
  }
}

/**
 * What a refused upload held goes back: its staged files, its queue place and its key. A step
 * that fails (the store is away) is logged and the others still run, so the refusal itself is
 * what the producer gets.
 */
async function giveBack(
  ctx: ServerContext,
  held: {
    staged: StagedUpload | undefined;
    placed: Pick<UploadJob, "stagingDirectory" | "bundleDirectory"> | undefined;
    slot: boolean;
    scope: IdempotencyScope | undefined;
  },
) {
  const { store, stagingArea } = ctx;
  const { staged, placed, slot, scope } = held;
  const steps: [string, (() => Promise<void>) | undefined][] = [
    ["removing the received upload", staged && (() => removeUploadDirectory(staged.directory))],
    ["removing the staged upload", placed && (() => stagingArea.remove(placed))],
    ["giving the queue place back", slot ? () => store.releaseQueueSlot() : undefined],
    ["releasing the idempotency key", scope && (() => store.releaseKey(scope))],
  ];
  for (const [what, step] of steps) {
    if (step === undefined) continue;
    try {
      await step();
    } catch (error) {
      ctx.emit({ type: "warning", message: `refused upload: ${what}: ${errorMessage(error)}` });
    }
  }
}

function contentTypeOf(request: IncomingMessage): string {
  const header = request.headers["content-type"] ?? "";
  return header.split(";")[0]?.trim().toLowerCase() ?? "";
}

function checkContentType(request: IncomingMessage) {
  const header = request.headers["content-type"] ?? "";
  if (!ACCEPTED_CONTENT_TYPES.has(contentTypeOf(request))) {
    throw new HttpError(
      415,
      "unsupported_media_type",
      `Content-Type must be application/x-tar, application/gzip or application/x-gzip, got ${JSON.stringify(header)}`,
    );
  }
}
