import { createHash, randomBytes } from "node:crypto";
import type { AcceptedUpload, IdempotencyScope } from "@distributor/upload-store";

// Where a partial upload's declaration and bytes live, behind one interface with two
// implementations: the staging directory (directory-store.ts) and an S3 staging bucket/prefix
// (s3-store.ts). The resumable routes and the expiry see only this.
// docs/design/upload-service.md, "Resumable uploads".

/** What a creation declared; fixed for the partial's life. */
export interface PartialInfo {
  id: string;
  tokenId: string;
  pipelineId: string;
  key: string | null;
  /** `Upload-Length`: the archive's size. */
  length: number;
  /** The archive's Content-Type (gzip or tar). */
  contentType: string;
  /** The archive's SHA-256 (hex) when the producer declared it; checked once all arrived. */
  sha256: string | null;
  /** Epoch ms. */
  createdAt: number;
  /**
   * Random, new at every creation: a partial terminated, expired or refused and created again
   * under the same id (the same idempotency key) is another incarnation, and bytes a writer of an
   * earlier one sends late never count in it. Absent in declarations of earlier versions.
   */
  incarnation?: string;
}

/** A partial as its store holds it now. */
export interface Partial {
  info: PartialInfo;
  /** Bytes held durably, from the start, when this was read: the offset the server may report. */
  offset: number;
  /**
   * When it expires (epoch ms): `partial_ttl` after its last bytes arrived, or once accepted,
   * `partial_ttl` after its acceptance.
   */
  expiresAt: number;
  /** When the acceptance was recorded (epoch ms), once accepted. */
  acceptedAt: number | undefined;
  /** Whether bytes of it are still stored (an accepted one's go a grace after acceptance). */
  holdsBytes: boolean;
  /** How many pieces its bytes are stored in (chunk objects on S3; the data file otherwise). */
  pieces: number;
  /** The accepted upload, once the completed partial was accepted. */
  accepted: AcceptedUpload | undefined;
  /** Its bytes were removed by expiry (a resume must start over). */
  expired: boolean;
}

export interface PartialLock {
  /** Marks the lock alive; false when another holder took it over meanwhile. */
  refresh(): Promise<boolean>;
  release(): Promise<void>;
}

/** The bytes of one PATCH, written from its verified offset on. */
export interface PartialWriter {
  write(bytes: Buffer): Promise<void>;
  /** Makes every byte written durable; resolves with the offset the partial holds now. */
  commit(): Promise<number>;
  /** Takes back what this writer wrote (a body past the length, or failing its checksum). */
  discard(): Promise<void>;
  close(): Promise<void>;
}

/** A completed partial's archive: each iteration reads the same pieces, listed once. */
export type PartialArchive = AsyncIterable<Uint8Array>;

export interface PartialStore {
  /** Where the partials live, for messages: a directory or `s3://bucket/prefix`. */
  readonly location: string;
  /** Creates the partial's declaration, durably; false when one with this id exists already. */
  create(info: PartialInfo): Promise<boolean>;
  /** The partial `id` as stored, or undefined when there is none (or it is half created). */
  read(id: string): Promise<Partial | undefined>;
  /** Every stored partial's id, declared or half created. */
  ids(): Promise<string[]>;
  /** When anything of partial `id` last changed (epoch ms); undefined when nothing is left. */
  lastChanged(id: string): Promise<number | undefined>;
  /** The lock one request writes under; `busy` while another holds it, `gone` once removed. */
  lock(partial: Partial, owner: string): Promise<PartialLock | "busy" | "gone">;
  /**
   * A writer at `offset`, which must be the offset the partial holds (checked again here);
   * `expected` bounds what it buffers (the body's Content-Length when declared).
   */
  openWriter(
    partial: Partial,
    offset: number,
    lock: PartialLock,
    expected?: number,
  ): Promise<PartialWriter>;
  /**
   * The completed archive's bytes, in order. A storage failure while reading is a
   * `PartialUnreadableError`, a partial removed or created again meanwhile a `PartialGoneError`.
   */
  archive(partial: Partial): PartialArchive;
  /**
   * Records the accepted upload. Its bytes stay: a completion that raced this one may still read
   * them; the sweeper removes them a grace later (`acceptedBytesGraceMs`).
   */
  markAccepted(partial: Partial, accepted: AcceptedUpload): Promise<void>;
  /**
   * Removes a partial's bytes; a partial not accepted keeps its declaration, marked expired, so
   * a resume learns it expired.
   */
  dropBytes(partial: Partial): Promise<void>;
  /** Removes everything of partial `id`. */
  remove(id: string): Promise<void>;
}

/**
 * A writer was opened at an offset the partial no longer holds (another request wrote meanwhile):
 * answered `409 offset_mismatch` with what is held.
 */
export class PartialMovedError extends Error {
  constructor(readonly held: number) {
    super(`the partial holds ${held} bytes now`);
    this.name = "PartialMovedError";
  }
}

/**
 * The partial's bytes could not be read back (a reset GET, a timeout, an object shorter than its
 * name says): nothing is wrong with the upload; answered 503 and the partial kept.
 */
export class PartialUnreadableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "PartialUnreadableError";
  }
}

/**
 * The partial this request wrote or read is no longer the one stored: it was terminated,
 * expired, accepted by another request, or created again (another incarnation).
 */
export class PartialGoneError extends Error {
  constructor(
    message: string,
    readonly reason: "removed" | "expired" | "accepted",
  ) {
    super(message);
    this.name = "PartialGoneError";
  }
}

/**
 * The request's lock on a partial was taken over (it stalled past the lock's staleness): what it
 * wrote is not reported and it never completes the upload; the holder that took over does.
 */
export class PartialLockLostError extends Error {
  constructor(id: string) {
    super(`the lock on partial ${id} was taken over by another request`);
    this.name = "PartialLockLostError";
  }
}

/** A new incarnation's nonce: lowercase hex, so it fits in S3 chunk names. */
export function newIncarnation(): string {
  return randomBytes(6).toString("hex");
}

/**
 * How long an accepted partial's bytes stay after its acceptance: a completion that raced the
 * accepting one finds the acceptance and replays it without reading them, but one that started
 * its checksum pass before may still be reading. Shorter than `partial_ttl`, which the accepted
 * record itself lives.
 */
export function acceptedBytesGraceMs(ttlMs: number): number {
  return Math.min(Math.floor(ttlMs / 2), 60_000);
}

/**
 * The idempotency scope a completion claims: the producer's key, or for a partial created without
 * one a key of its own that no producer can send (a space is not a visible character), so that a
 * second completion of the same partial is a replay, never a second acceptance.
 */
export function completionScope(info: PartialInfo): IdempotencyScope {
  return {
    tokenId: info.tokenId,
    pipelineId: info.pipelineId,
    key: info.key ?? `tus partial ${info.id}`,
  };
}

/**
 * The partial's id: derived from the idempotency key's scope, so a producer that restarted finds
 * its partial again with the same key on any instance; random without a key.
 */
export function partialId(scope: IdempotencyScope | undefined): string {
  if (scope === undefined) return randomBytes(24).toString("base64url");
  return createHash("sha256")
    .update(JSON.stringify(["partial", scope.tokenId, scope.pipelineId, scope.key]))
    .digest("base64url")
    .slice(0, 32);
}

const ID = /^[A-Za-z0-9_-]{16,64}$/;

/** True for an id a partial can have (what a URL names is checked before any IO). */
export function validPartialId(id: string): boolean {
  return ID.test(id);
}

/** Every partial's directory (or S3 prefix) is named so; nothing else of that name is ours. */
export const PARTIAL_DIRECTORY_PREFIX = "partial-";
