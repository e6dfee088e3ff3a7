import { createHash } from "node:crypto";
import {
  AbortMultipartUploadCommand,
  type CompletedPart,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  PutObjectCommand,
  type S3Client,
  UploadPartCommand,
} from "@aws-sdk/client-s3";
import type { WriteData } from "@distributor/storage";
import { isByteReader } from "@distributor/storage/adapter";
import type { MemoryBudget } from "./memory-budget.js";
import {
  partsFromReader,
  partsOf,
  prepend,
  readChunks,
  readExpected,
  readUpTo,
  releaseBody,
  takeBody,
} from "./payload.js";

/** The conditional header a write carries: none, a no-clobber create, or a compare-and-swap. */
export type WriteCondition =
  | { kind: "none" }
  | { kind: "absent" }
  | { kind: "match"; etag: string };

/**
 * User metadata (`x-amz-meta-distributor-write`) naming the write that stored an object: a fresh
 * id per `writeFile`, so that a write whose answer was lost can recognise its own object.
 */
export const WRITE_ID_METADATA = "distributor-write";

export interface UploadTarget {
  client: S3Client;
  bucket: string;
  key: string;
  contentType: string;
  /** Object metadata headers stored with the object (single PUT and multipart alike). */
  headers?: ObjectHeaders | undefined;
  condition: WriteCondition;
  /** This write's id, stored as `WRITE_ID_METADATA` (single PUT and multipart alike). */
  writeId: string;
  /** `sha256:<hex>` the caller expects; stored up front so multipart objects carry it too. */
  expectedSha256?: string | undefined;
  signal?: AbortSignal | undefined;
  /** Runs before a multipart upload starts (a single PUT carries its condition itself). */
  beforeMultipart?: () => Promise<void>;
  /**
   * One PUT whatever the size (a `commit` write: a multipart completion does not enforce
   * conditions everywhere); larger than `MAX_SINGLE_PUT` fails with `PayloadTooLarge`.
   */
  singlePut?: boolean;
}

/** `Cache-Control`, `Content-Disposition` and `Content-Encoding` of an object, when set. */
export interface ObjectHeaders {
  CacheControl?: string;
  ContentDisposition?: string;
  ContentEncoding?: string;
}

export interface UploadTuning {
  /** Payloads up to this many bytes go in one PUT; larger ones in parts. */
  multipartThreshold: number;
  partSize: number;
  partConcurrency: number;
  /**
   * The bytes every upload of the backend may buffer together (see `MemoryBudget`); without
   * one, each upload is bounded on its own only.
   */
  memory?: MemoryBudget;
}

export interface UploadResult {
  etag: string | undefined;
  sha256: string;
}

/** A payload that must be one PUT is larger than a PUT may be. */
export class PayloadTooLarge extends Error {
  override readonly name = "PayloadTooLarge";
}

/** S3's limit for one PUT. */
export const MAX_SINGLE_PUT = 5 * 1024 * 1024 * 1024;

/** The payload's digest differs from the one the caller promised. */
export class DigestMismatch extends Error {
  override readonly name = "DigestMismatch";
}

const MAX_PARTS = 10_000;

/**
 * Stores a payload under one key: a single PUT when it fits below the threshold (the head is
 * buffered until then), else a multipart upload with at most `partConcurrency` parts in flight.
 * Memory stays within (concurrency + 1) parts whatever the object's size. A multipart upload
 * that fails or is cancelled is aborted before this returns, so no parts are left behind.
 */
export async function upload(
  target: UploadTarget,
  data: WriteData,
  size: number | undefined,
  tuning: UploadTuning,
): Promise<UploadResult> {
  const budget = tuning.memory;
  const bytes = bufferedBytes(data, size, tuning, target.singlePut === true);
  if (budget === undefined || bytes === 0) return uploadBuffered(target, data, size, tuning);
  await budget.take(bytes, target.signal);
  try {
    return await uploadBuffered(target, data, size, tuning);
  } finally {
    budget.give(bytes);
  }
}

/** At most what `uploadBuffered` holds in its own buffers for `data` (not the caller's bytes). */
function bufferedBytes(
  data: WriteData,
  size: number | undefined,
  tuning: UploadTuning,
  single: boolean,
): number {
  if (typeof data === "string" || data instanceof Uint8Array) return 0;
  const parts = (tuning.partConcurrency + 1) * Math.max(tuning.partSize, (size ?? 0) / MAX_PARTS);
  if (isByteReader(data) && size !== undefined) {
    return !single && size > tuning.multipartThreshold ? parts : size + 1;
  }
  return single ? tuning.multipartThreshold + 1 : tuning.multipartThreshold + 1 + parts;
}

async function uploadBuffered(
  target: UploadTarget,
  data: WriteData,
  size: number | undefined,
  tuning: UploadTuning,
): Promise<UploadResult> {
  const hash = payloadDigest(target, data);
  const single = target.singlePut === true;
  if (typeof data === "string" || data instanceof Uint8Array) {
    const body = typeof data === "string" ? Buffer.from(data, "utf8") : Buffer.from(data);
    if (single && body.length > MAX_SINGLE_PUT) throw tooLarge(target);
    if (single || body.length <= tuning.multipartThreshold) return putOnce(target, body, hash);
  }
  let payload = data;
  const partSize = Math.max(tuning.partSize, Math.ceil((size ?? 0) / MAX_PARTS));
  if (isByteReader(data) && !single && size !== undefined && size > tuning.multipartThreshold) {
    // Parts are read straight from the source into part buffers that are used again once their
    // part is uploaded: a 1 GiB file needs the parts in flight, not 128 buffers of garbage.
    const spare: Buffer[] = [];
    const parts = partsFromReader(data, partSize, spare, target.signal);
    return putInParts(target, parts, tuning.partConcurrency, hash, (part) => {
      if (part.length === partSize) spare.push(part);
    });
  }
  // Sized by the announced size, so only up to the threshold: `size` is a hint.
  if (isByteReader(data) && size !== undefined && size <= tuning.multipartThreshold) {
    const pooled = takeBody(size);
    try {
      const read = await readExpected(data, size, target.signal, pooled);
      if (read.rest === undefined) return await putOnce(target, read.body, hash);
      // Longer than announced: go on as with any stream, the bytes read so far first.
      payload = read.rest;
    } finally {
      // Answered (or failed): nothing holds the body any more.
      releaseBody(pooled);
    }
  }
  const chunks = readChunks(payload, target.signal);
  try {
    if (single) {
      const whole = await readUpTo(chunks, MAX_SINGLE_PUT + 1);
      if (!whole.done) throw tooLarge(target);
      return await putOnce(target, whole.bytes, hash);
    }
    const expectsLarge = size !== undefined && size > tuning.multipartThreshold;
    const head = expectsLarge ? undefined : await readUpTo(chunks, tuning.multipartThreshold + 1);
    if (head?.done) return await putOnce(target, head.bytes, hash);
    const body = prepend(head?.bytes, chunks);
    return await putInParts(target, partsOf(body, partSize), tuning.partConcurrency, hash);
  } finally {
    // Releases the source when the upload stopped before reading all of it.
    await chunks.return(undefined);
  }
}

function tooLarge(target: UploadTarget): PayloadTooLarge {
  return new PayloadTooLarge(
    `${target.key} must be written in one PUT, which holds at most ${MAX_SINGLE_PUT} bytes`,
  );
}

async function putOnce(
  target: UploadTarget,
  body: Buffer,
  hash: PayloadDigest,
): Promise<UploadResult> {
  hash.update(body);
  const sha256 = hash.digest();
  checkDigest(target, sha256);
  const command = new PutObjectCommand({
    Bucket: target.bucket,
    Key: target.key,
    Body: body,
    ContentLength: body.length,
    ContentType: target.contentType,
    ...target.headers,
    Metadata: { sha256, [WRITE_ID_METADATA]: target.writeId },
    ...conditionHeaders(target.condition),
  });
  signPayloadAs(command, sha256);
  const response = await target.client.send(command, { abortSignal: target.signal });
  return { etag: response.ETag, sha256 };
}

/**
 * Signs the PUT with the payload digest already known instead of letting the signer hash the
 * body once more; the service checks the body against it (Ceph RGW and AWS answer
 * `XAmzContentSHA256Mismatch` otherwise), so a payload that is not what it claims is not stored.
 */
function signPayloadAs(command: PutObjectCommand, sha256: string): void {
  const hex = sha256.slice("sha256:".length);
  command.middlewareStack.add(
    (next) => (args) => {
      (args.request as { headers: Record<string, string> }).headers["x-amz-content-sha256"] = hex;
      return next(args);
    },
    { step: "build", name: "distributorPayloadSha256" },
  );
}

/** The digest a payload is checked against and recorded with. */
interface PayloadDigest {
  update(chunk: Uint8Array): void;
  /** `sha256:<hex>` of everything passed to `update`. */
  digest(): string;
}

/**
 * Hashes the payload, unless it is a `ByteReader` verifying the expected digest itself: such a
 * reader fails its final read unless its bytes have that digest, and every upload path reads to
 * the end before the PUT or the completion, so hashing again would only repeat the same check.
 */
function payloadDigest(target: UploadTarget, data: WriteData): PayloadDigest {
  const expected = target.expectedSha256;
  if (expected !== undefined && isByteReader(data) && data.verifiesSha256 === expected) {
    return { update: () => undefined, digest: () => expected };
  }
  const hash = createHash("sha256");
  return {
    update: (chunk) => {
      hash.update(chunk);
    },
    digest: () => `sha256:${hash.digest("hex")}`,
  };
}

/**
 * Uploads `partBuffers` (each one part, in order) with at most `concurrency` in flight; `release`
 * gets each part back once its upload settled and nothing refers to it any more.
 */
async function putInParts(
  target: UploadTarget,
  partBuffers: AsyncIterable<Buffer>,
  concurrency: number,
  hash: PayloadDigest,
  release?: (part: Buffer) => void,
): Promise<UploadResult> {
  const { client, bucket, key, signal } = target;
  await target.beforeMultipart?.();
  const created = await client.send(
    new CreateMultipartUploadCommand({
      Bucket: bucket,
      Key: key,
      ContentType: target.contentType,
      ...target.headers,
      Metadata: {
        ...(target.expectedSha256 === undefined ? {} : { sha256: target.expectedSha256 }),
        [WRITE_ID_METADATA]: target.writeId,
      },
    }),
    { abortSignal: signal },
  );
  const uploadId = created.UploadId;
  if (uploadId === undefined) throw new Error("CreateMultipartUpload returned no UploadId");
  const parts: CompletedPart[] = [];
  const inFlight = new Set<Promise<void>>();
  let failure: { error: unknown } | undefined;
  try {
    let partNumber = 0;
    for await (const part of partBuffers) {
      if (failure !== undefined) break;
      hash.update(part);
      partNumber += 1;
      if (partNumber > MAX_PARTS) throw new Error(`more than ${MAX_PARTS} parts`);
      const number = partNumber;
      const sent = client
        .send(
          new UploadPartCommand({
            Bucket: bucket,
            Key: key,
            UploadId: uploadId,
            PartNumber: number,
            Body: part,
            ContentLength: part.length,
          }),
          { abortSignal: signal },
        )
        .then(
          (response) => {
            parts[number - 1] = { PartNumber: number, ETag: response.ETag };
          },
          (error: unknown) => {
            failure ??= { error };
          },
        )
        .finally(() => {
          inFlight.delete(sent);
          release?.(part);
        });
      inFlight.add(sent);
      while (inFlight.size >= concurrency) await Promise.race(inFlight);
    }
    await Promise.all(inFlight);
    if (failure !== undefined) throw failure.error;
    const sha256 = hash.digest();
    checkDigest(target, sha256);
    const response = await client.send(
      new CompleteMultipartUploadCommand({
        Bucket: bucket,
        Key: key,
        UploadId: uploadId,
        MultipartUpload: { Parts: parts },
        ...conditionHeaders(target.condition),
      }),
      { abortSignal: signal },
    );
    return { etag: response.ETag, sha256 };
  } catch (error) {
    // Parts still uploading would survive an abort sent before they finish.
    await Promise.allSettled(inFlight);
    // Sent without the caller's signal: a cancelled write must still clean up.
    await client
      .send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: uploadId }))
      .catch((abortError: unknown) => {
        if (error instanceof Error && error.cause === undefined) error.cause = abortError;
      });
    throw error;
  }
}

export function conditionHeaders(condition: WriteCondition): {
  IfNoneMatch?: string;
  IfMatch?: string;
} {
  switch (condition.kind) {
    case "none":
      return {};
    case "absent":
      return { IfNoneMatch: "*" };
    case "match":
      // Ceph RGW (and DigitalOcean Spaces) compare If-Match with the bare ETag; AWS accepts it too.
      return { IfMatch: condition.etag };
  }
}

function checkDigest(target: UploadTarget, sha256: string): void {
  if (target.expectedSha256 !== undefined && target.expectedSha256 !== sha256) {
    throw new DigestMismatch(`payload is ${sha256}, expected ${target.expectedSha256}`);
  }
}
