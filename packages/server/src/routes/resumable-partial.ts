import type { IncomingMessage } from "node:http";
import { RETRY_AFTER_SECONDS, type RequestLog, type ServerContext } from "../context.js";
import { HttpError } from "../http-error.js";
import { LOCK_REFRESH_MS, lockOwner } from "../resumable/directory-store.js";
import type { Partial, PartialLock } from "../resumable/partial-store.js";
import { httpDate, tusHeaders } from "../resumable/tus.js";
import { uploadTarget } from "./upload.js";

// A partial upload as the resumable routes see it (resumable.ts): whose it is, its lock for one
// request, how many a token holds, and the answers that name its state.

/**
 * The request's token, the upload's pipeline and the upload itself: 404 when there is none (it
 * was terminated or never existed), 403 when another token created it, 410 when it expired.
 */
export async function ownPartial(
  ctx: ServerContext,
  request: IncomingMessage,
  pipelineId: string,
  id: string,
  log: RequestLog,
  options: { expiredToo?: boolean } = {},
) {
  const { token, pipeline } = uploadTarget(ctx, request, pipelineId, log);
  const location = `/pipelines/${encodeURIComponent(pipeline.id)}/uploads/${id}`;
  const partial = await ctx.resumable.partials.read(id);
  if (partial === undefined || partial.info.pipelineId !== pipeline.id) throw notFound(location);
  if (partial.info.tokenId !== token.id) {
    throw new HttpError(
      403,
      "upload_not_owned",
      `upload ${location} was created with another token; token ${token.id} may not use it`,
      { headers: tusHeaders() },
    );
  }
  if (!options.expiredToo && partial.accepted === undefined) {
    if (partial.expired) throw expired(location);
    if (partial.expiresAt <= Date.now()) {
      await ctx.resumable.partials.dropBytes(partial);
      ctx.metrics.partialExpired();
      throw expired(location);
    }
  }
  return { token, pipeline, partial, location };
}

/**
 * The partial's lock for this request. A request of this instance that holds it is stopped
 * first (its producer's connection broke and it resumes); another instance's holder answers
 * `423` until its lock goes stale.
 */
export async function takeLock(
  ctx: ServerContext,
  partial: Partial,
  request: IncomingMessage,
): Promise<PartialLock> {
  const { holders, instanceId } = ctx.resumable;
  const id = partial.info.id;
  const earlier = holders.get(id);
  if (earlier !== undefined) {
    earlier.request.destroy();
    await earlier.released;
  }
  const lock = await ctx.resumable.partials.lock(partial, lockOwner(instanceId));
  if (lock === "gone") {
    throw new HttpError(404, "upload_not_found", `upload ${id} was terminated meanwhile`, {
      headers: tusHeaders(),
    });
  }
  if (lock === "busy") throw busy(`another request is writing upload ${id}`);
  let release: () => void = () => undefined;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  holders.set(id, { request, released });
  return {
    refresh: () => lock.refresh(),
    async release() {
      try {
        await lock.release();
      } finally {
        if (holders.get(id)?.request === request) holders.delete(id);
        release();
      }
    },
  };
}

/**
 * Partial uploads `tokenId` holds now (expired and accepted ones no longer count). One that
 * cannot be read is not skipped (that would let a token past its limit): the creation is
 * answered 503 instead.
 */
export async function heldBy(ctx: ServerContext, tokenId: string): Promise<number> {
  const { partials } = ctx.resumable;
  let count = 0;
  try {
    for (const id of await partials.ids()) {
      const partial = await partials.read(id);
      if (partial?.info.tokenId !== tokenId) continue;
      if (partial.accepted === undefined && !partial.expired && partial.expiresAt > Date.now())
        count += 1;
    }
  } catch (error) {
    throw new HttpError(
      503,
      "partials_unavailable",
      `the partial uploads in ${partials.location} could not be counted against token ${tokenId}'s limit: ${(error as Error).message}`,
      { headers: tusHeaders({ "Retry-After": RETRY_AFTER_SECONDS }), cause: error },
    );
  }
  return count;
}

/** Keeps one request's lock alive while its body arrives and while it completes the upload. */
export interface LockKeeper {
  lock: PartialLock;
  /** Bytes arrived since the last refresh. */
  progressed(): void;
  /** The upload is being completed: refreshed on every tick from now on. */
  completing(): void;
  /** Another request took the lock over (this one stalled past its staleness). */
  lost(): boolean;
  stop(): void;
}

export function keepLock(lock: PartialLock, request: IncomingMessage): LockKeeper {
  let progressed = false;
  let completing = false;
  let lost = false;
  const timer = setInterval(() => {
    if (!progressed && !completing) return;
    progressed = false;
    void lock.refresh().then(
      (mine) => {
        if (mine) return;
        lost = true;
        // Stop receiving: what arrived is not this request's to report any more.
        if (!completing) request.destroy();
      },
      () => undefined,
    );
  }, LOCK_REFRESH_MS);
  timer.unref();
  return {
    lock,
    progressed: () => {
      progressed = true;
    },
    completing: () => {
      completing = true;
    },
    lost: () => lost,
    stop: () => clearInterval(timer),
  };
}

export function uploadHeaders(partial: Partial, location: string): Record<string, string> {
  return tusHeaders({
    "Upload-Offset": String(partial.offset),
    "Upload-Length": String(partial.info.length),
    ...(partial.accepted === undefined
      ? { "Upload-Expires": httpDate(partial.expiresAt) }
      : { "Content-Location": location }),
    "Cache-Control": "no-store",
  });
}

export function offsetConflict(partial: Partial, offset: number, location: string): HttpError {
  return new HttpError(
    409,
    "offset_mismatch",
    `Upload-Offset ${offset} is not the ${partial.offset} bytes upload ${location} holds; HEAD it and send from there`,
    { headers: uploadHeaders(partial, location) },
  );
}

export function notFound(location: string): HttpError {
  return new HttpError(
    404,
    "upload_not_found",
    `no upload at ${location}: it was terminated, expired long ago or never existed; create a new one`,
    { headers: tusHeaders() },
  );
}

export function expired(location: string): HttpError {
  return new HttpError(
    410,
    "upload_expired",
    `upload ${location} expired (server.uploads.partial_ttl) and its bytes were removed; create a new one`,
    { headers: tusHeaders() },
  );
}

export function busy(message: string): HttpError {
  return new HttpError(423, "upload_locked", `${message}; retry shortly`, {
    headers: tusHeaders({ "Retry-After": "1" }),
  });
}
