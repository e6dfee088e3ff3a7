import { createHash } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { RequestLog, ServerContext } from "../context.js";
import { HttpError } from "../http-error.js";
import { idempotencyKey } from "../idempotency.js";
import { maxPieces } from "../resumable/chunks.js";
import {
  newIncarnation,
  type Partial,
  PartialGoneError,
  PartialLockLostError,
  PartialMovedError,
  type PartialStore,
  partialId,
} from "../resumable/partial-store.js";
import {
  byteCountHeader,
  CHECKSUM_ALGORITHMS,
  checkTusVersion,
  OFFSET_CONTENT_TYPE,
  parseUploadMetadata,
  TUS_EXTENSIONS,
  TUS_VERSION,
  tusHeaders,
  uploadChecksum,
} from "../resumable/tus.js";
import { complete } from "./resumable-complete.js";
import {
  busy,
  expired,
  heldBy,
  keepLock,
  type LockKeeper,
  notFound,
  offsetConflict,
  ownPartial,
  takeLock,
  uploadHeaders,
} from "./resumable-partial.js";
import { ACCEPTED_CONTENT_TYPES, sendAccepted, uploadTarget } from "./upload.js";

// Resumable uploads, tus 1.0 (docs/integrations/http-upload.md, "Resumable uploads"): creation
// with POST, HEAD for the offset the server durably holds, PATCH to append, DELETE to terminate.
// The PATCH that completes the archive hands it to `acceptArchive`, the single-request upload's
// own path, and answers as that does (202 with the accepted upload).

/** `OPTIONS /pipelines/{id}/uploads[/{upload}]`: what this server speaks. */
export function tusOptions(response: ServerResponse) {
  sendEmpty(response, 204, {
    "Tus-Version": TUS_VERSION,
    "Tus-Extension": TUS_EXTENSIONS,
    "Tus-Checksum-Algorithm": [...CHECKSUM_ALGORITHMS].join(","),
  });
}

/**
 * `POST /pipelines/{id}/uploads` with `Tus-Resumable`: creates a partial upload, or finds the one
 * the same token created with the same `Idempotency-Key` (its offset tells the producer what to
 * send; an accepted one answers as a replay).
 */
export async function createUpload(
  ctx: ServerContext,
  request: IncomingMessage,
  response: ServerResponse,
  pipelineId: string,
  log: RequestLog,
) {
  checkTusVersion(request);
  const { token, pipeline } = uploadTarget(ctx, request, pipelineId, log);
  const key = idempotencyKey(request);
  if (request.headers["upload-defer-length"] !== undefined) {
    throw new HttpError(
      400,
      "bad_request",
      "Upload-Defer-Length is not supported: send Upload-Length",
      {
        headers: tusHeaders(),
      },
    );
  }
  const length = byteCountHeader(request, "Upload-Length");
  const max = pipeline.source.maxUploadSize;
  if (length > max) {
    throw new HttpError(
      413,
      "upload_too_large",
      `Upload-Length ${length} is larger than the pipeline's max_upload_size of ${max} bytes`,
      { headers: tusHeaders({ "Tus-Max-Size": String(max) }) },
    );
  }
  const metadata = parseUploadMetadata(headerText(request, "upload-metadata"));
  const contentType = metadata.get("filetype") ?? "application/x-tar";
  if (!ACCEPTED_CONTENT_TYPES.has(contentType)) {
    throw new HttpError(
      415,
      "unsupported_media_type",
      `Upload-Metadata filetype must be application/x-tar, application/gzip or application/x-gzip, got ${JSON.stringify(contentType)}`,
      { headers: tusHeaders() },
    );
  }
  const sha256 = metadata.get("sha256") ?? null;
  if (sha256 !== null && !/^[0-9a-f]{64}$/.test(sha256)) {
    throw new HttpError(
      400,
      "bad_request",
      "Upload-Metadata sha256 must be 64 lowercase hex digits",
      {
        headers: tusHeaders(),
      },
    );
  }
  const { partials } = ctx.resumable;
  const scope = key === undefined ? undefined : { tokenId: token.id, pipelineId: pipeline.id, key };
  const id = partialId(scope);
  const location = `/pipelines/${encodeURIComponent(pipeline.id)}/uploads/${id}`;
  for (let attempt = 0; attempt < 2; attempt++) {
    const existing = await partials.read(id);
    if (existing !== undefined) {
      const same = existing.info.length === length && existing.info.sha256 === sha256;
      if (!same) {
        throw new HttpError(
          409,
          "idempotency_conflict",
          `Idempotency-Key was already used for a resumable upload of ${existing.info.length} bytes (sha256 ${existing.info.sha256 ?? "not declared"}); this one declares ${length} bytes (sha256 ${sha256 ?? "not declared"}): terminate it (DELETE ${location}) or upload with a new key`,
          { headers: tusHeaders() },
        );
      }
      if (existing.accepted !== undefined) {
        log.replayed = true;
        log.run_id = existing.accepted.run_id;
        sendAccepted(response, existing.accepted, true, uploadHeaders(existing, location));
        return;
      }
      if (!existing.expired && existing.expiresAt > Date.now()) {
        sendEmpty(response, 201, { Location: location, ...uploadHeaders(existing, location) });
        return;
      }
      // Expired: what it held is gone; the producer starts over under the same key.
      await partials.remove(id);
    }
    if ((await heldBy(ctx, token.id)) >= ctx.config.server.uploads.maxPartialsPerToken) {
      throw new HttpError(
        429,
        "too_many_partial_uploads",
        `token ${token.id} holds server.uploads.max_partials_per_token (${ctx.config.server.uploads.maxPartialsPerToken}) partial uploads already; complete or terminate one first, or wait until one expires`,
        { headers: tusHeaders() },
      );
    }
    const info = {
      id,
      tokenId: token.id,
      pipelineId: pipeline.id,
      key: key ?? null,
      length,
      contentType,
      sha256,
      createdAt: Date.now(),
      incarnation: newIncarnation(),
    };
    if (await partials.create(info)) {
      const created = await partials.read(id);
      if (created === undefined) break;
      sendEmpty(response, 201, { Location: location, ...uploadHeaders(created, location) });
      return;
    }
  }
  throw busy(`upload ${location} is being created by another request`);
}

/** `HEAD` of an upload: the offset it durably holds, its length and when it expires. */
export async function headUpload(
  ctx: ServerContext,
  request: IncomingMessage,
  response: ServerResponse,
  pipelineId: string,
  id: string,
  log: RequestLog,
) {
  checkTusVersion(request);
  const { partial, location } = await ownPartial(ctx, request, pipelineId, id, log);
  sendEmpty(response, 200, uploadHeaders(partial, location));
}

/**
 * `PATCH` of an upload: appends the body at `Upload-Offset`, which must be the offset held. The
 * bytes that arrived are kept when the connection breaks (flushed before any answer or later
 * HEAD reports them); a body that fails its `Upload-Checksum`, or runs past `Upload-Length`, is
 * taken back whole. The PATCH that completes the archive answers with its acceptance.
 */
export async function patchUpload(
  ctx: ServerContext,
  request: IncomingMessage,
  response: ServerResponse,
  pipelineId: string,
  id: string,
  log: RequestLog,
) {
  checkTusVersion(request);
  const contentType = headerText(request, "content-type")?.split(";")[0]?.trim().toLowerCase();
  if (contentType !== OFFSET_CONTENT_TYPE) {
    throw new HttpError(
      415,
      "unsupported_media_type",
      `a PATCH must have Content-Type ${OFFSET_CONTENT_TYPE}, got ${JSON.stringify(contentType ?? null)}`,
      { headers: tusHeaders() },
    );
  }
  const offset = byteCountHeader(request, "Upload-Offset");
  const checksum = uploadChecksum(request);
  const { token, pipeline, partial, location } = await ownPartial(
    ctx,
    request,
    pipelineId,
    id,
    log,
  );
  const declared = headerText(request, "content-length");
  if (declared !== undefined && offset + Number(declared) > partial.info.length) {
    throw new HttpError(
      413,
      "upload_past_length",
      `a body of ${declared} bytes at offset ${offset} runs past Upload-Length ${partial.info.length}`,
      { headers: uploadHeaders(partial, location) },
    );
  }
  const lock = await takeLock(ctx, partial, request);
  const keeper = keepLock(lock, request);
  try {
    // Read again under the lock: the request that held it may have added bytes, or the partial
    // may be gone (terminated, expired, created again) since.
    const current = await ctx.resumable.partials.read(id);
    if (current === undefined) throw notFound(location);
    if (current.accepted !== undefined) {
      if (offset !== current.info.length) throw offsetConflict(current, offset, location);
      log.replayed = true;
      log.run_id = current.accepted.run_id;
      sendAccepted(response, current.accepted, true, uploadHeaders(current, location));
      return;
    }
    if (current.expired) throw expired(location);
    if (offset !== current.offset) throw offsetConflict(current, offset, location);
    if (current.offset < current.info.length && current.pieces >= maxPieces(current.info.length)) {
      throw new HttpError(
        413,
        "upload_too_fragmented",
        `upload ${location} is stored in ${current.pieces} pieces already, the most one of ${current.info.length} bytes may have; terminate it (DELETE) and upload again in fewer requests`,
        { headers: uploadHeaders(current, location) },
      );
    }
    if (offset > 0) ctx.metrics.resumed(pipeline.id);
    const held = await appendBody(ctx.resumable.partials, request, current, {
      offset,
      checksum,
      keeper,
      location,
      expected: declared === undefined ? undefined : Number(declared),
    });
    if (held < current.info.length) {
      sendEmpty(response, 204, uploadHeaders({ ...current, offset: held }, location));
      return;
    }
    // A holder whose lock was taken over while it received never completes: the one that took
    // over does. The lock is kept alive through the completion from here on.
    if (keeper.lost() || !(await lock.refresh())) throw new PartialLockLostError(id);
    keeper.completing();
    log.counts_upload = true;
    await complete(ctx, response, { token, pipeline, partial: current, location, log });
  } catch (error) {
    throw await storeRefusal(ctx.resumable.partials, error, id, offset, location);
  } finally {
    keeper.stop();
    await lock.release();
  }
}

/** What a partial that changed under a request answers: 404, 410, 409 or 423. */
async function storeRefusal(
  partials: PartialStore,
  error: unknown,
  id: string,
  offset: number,
  location: string,
): Promise<unknown> {
  if (error instanceof PartialLockLostError) {
    return busy(`another request took over writing upload ${location}`);
  }
  if (!(error instanceof PartialGoneError)) return error;
  if (error.reason === "expired") return expired(location);
  const now = error.reason === "accepted" ? await partials.read(id) : undefined;
  return now === undefined ? notFound(location) : offsetConflict(now, offset, location);
}

/** `DELETE` of an upload: terminates it; its bytes are removed and it is unknown from then on. */
export async function terminateUpload(
  ctx: ServerContext,
  request: IncomingMessage,
  response: ServerResponse,
  pipelineId: string,
  id: string,
  log: RequestLog,
) {
  checkTusVersion(request);
  const { partial } = await ownPartial(ctx, request, pipelineId, id, log, { expiredToo: true });
  const lock = await takeLock(ctx, partial, request);
  try {
    await ctx.resumable.partials.remove(partial.info.id);
  } finally {
    await lock.release();
  }
  sendEmpty(response, 204);
}

/**
 * Appends the request body at `offset`; resolves with the offset held after, durably. A body cut
 * short keeps what arrived, unless it carried a checksum (unverifiable now); one past the length
 * or failing its checksum is taken back whole.
 */
async function appendBody(
  partials: PartialStore,
  request: IncomingMessage,
  partial: Partial,
  patch: {
    offset: number;
    checksum: { algorithm: string; digest: string } | undefined;
    keeper: LockKeeper;
    location: string;
    expected: number | undefined;
  },
): Promise<number> {
  const { offset, checksum, keeper, location } = patch;
  const room = partial.info.length - offset;
  const hash = checksum === undefined ? undefined : createHash(checksum.algorithm);
  let writer: Awaited<ReturnType<PartialStore["openWriter"]>>;
  try {
    writer = await partials.openWriter(partial, offset, keeper.lock, patch.expected);
  } catch (error) {
    if (error instanceof PartialMovedError) {
      throw offsetConflict({ ...partial, offset: error.held }, offset, location);
    }
    throw error;
  }
  let written = 0;
  let refusal: HttpError | undefined;
  try {
    try {
      for await (const chunk of request.iterator({
        destroyOnReturn: false,
      }) as AsyncIterable<Buffer>) {
        if (keeper.lost()) break;
        if (written + chunk.length > room) {
          refusal = new HttpError(
            413,
            "upload_past_length",
            `the body runs past Upload-Length ${partial.info.length} (offset ${offset}, more than ${room} bytes); nothing of it was kept`,
            { headers: tusHeaders({ "Upload-Offset": String(offset) }) },
          );
          break;
        }
        await writer.write(chunk);
        hash?.update(chunk);
        written += chunk.length;
        keeper.progressed();
      }
    } catch {
      // The connection broke: what arrived is kept (without a checksum to check it against).
      if (checksum !== undefined) await writer.discard();
      return await writer.commit();
    }
    if (refusal === undefined && hash !== undefined && checksum !== undefined) {
      const digest = hash.digest("base64");
      if (digest !== checksum.digest) {
        refusal = new HttpError(
          460,
          "checksum_mismatch",
          `the body's ${checksum.algorithm} is ${digest}, not the ${checksum.digest} of Upload-Checksum; nothing of it was kept`,
          { headers: tusHeaders({ "Upload-Offset": String(offset) }) },
        );
      }
    }
    if (refusal !== undefined) {
      await writer.discard();
      await writer.commit();
      throw refusal;
    }
    return await writer.commit();
  } finally {
    await writer.close();
  }
}

function headerText(request: IncomingMessage, name: string): string | undefined {
  const value = request.headers[name];
  return typeof value === "string" ? value : undefined;
}

function sendEmpty(response: ServerResponse, status: number, headers: Record<string, string> = {}) {
  response.writeHead(status, { ...tusHeaders(), ...headers });
  response.end();
}
