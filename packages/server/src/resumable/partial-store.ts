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
}

/** A partial as its store holds it now. */
export interface Partial {
  info: PartialInfo;
  /** Bytes held durably, from the start, when this was read: the offset the server may report. */
  offset: number;
  /** When it expires (epoch ms): `partial_ttl` after its last bytes arrived. */
  expiresAt: number;
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
  /** A writer at `offset`, which must be the offset the partial holds (checked again here). */
  openWriter(partial: Partial, offset: number, lock: PartialLock): Promise<PartialWriter>;
  /** The completed archive's bytes, in order. */
  archive(partial: Partial): AsyncIterable<Uint8Array>;
  /** Records the accepted upload and drops the bytes (the staged bundle holds them now). */
  markAccepted(partial: Partial, accepted: AcceptedUpload): Promise<void>;
  /** Removes a partial's bytes, keeping its declaration so a resume learns it expired. */
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
