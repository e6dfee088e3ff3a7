import { createHash } from "node:crypto";
import { addAbortSignal, Readable } from "node:stream";
import {
  AbortMultipartUploadCommand,
  type CompletedPart,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  PutObjectCommand,
  type S3Client,
  UploadPartCommand,
} from "@aws-sdk/client-s3";
import type { ByteReader, WriteData } from "@distributor/storage";
import { isByteReader, writeSource } from "@distributor/storage/adapter";

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

/**
 * Bytes that uploads running at once may hold in buffers, taken before an upload reads and
 * given back when it ends. An upload that needs more than is free waits for others to finish;
 * one alone always proceeds, so a part size above the budget still works, one at a time. With
 * many outputs in flight (`transfers`) this, not their number, bounds the memory.
 */
export class MemoryBudget {
  #used = 0;
  readonly #waiting: (() => void)[] = [];

  constructor(readonly limit: number) {}

  async take(bytes: number, signal: AbortSignal | undefined): Promise<void> {
    while (this.#used > 0 && this.#used + bytes > this.limit) {
      signal?.throwIfAborted();
      await new Promise<void>((resolve) => {
        const wake = () => {
          signal?.removeEventListener("abort", wake);
          resolve();
        };
        this.#waiting.push(wake);
        signal?.addEventListener("abort", wake, { once: true });
      });
    }
    signal?.throwIfAborted();
    this.#used += bytes;
  }

  give(bytes: number): void {
    this.#used -= bytes;
    for (const wake of this.#waiting.splice(0)) wake();
  }
}

export interface UploadResult {
  etag: string | undefined;
  sha256: string;
}

/** The payload's bytes could not be read: the source's fault, not the bucket's. */
export class SourceFailure extends Error {
  override readonly name = "SourceFailure";
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

/** The payload as Buffers; a failing or cancelled source surfaces as `SourceFailure`/the abort. */
async function* readChunks(
  data: WriteData,
  signal: AbortSignal | undefined,
): AsyncGenerator<Buffer> {
  const source = writeSource(data);
  const readable =
    source instanceof Readable ? source : Readable.from(source, { objectMode: false });
  if (signal !== undefined) addAbortSignal(signal, readable);
  try {
    for await (const chunk of readable) {
      yield typeof chunk === "string"
        ? Buffer.from(chunk, "utf8")
        : Buffer.from(chunk as Uint8Array);
    }
  } catch (error) {
    throw sourceFailure(error, signal);
  } finally {
    readable.destroy();
  }
}

/**
 * Bodies of small single PUTs, kept by power-of-two capacity and used again once their PUT is
 * answered: a thousand 100 KiB files otherwise leave a thousand buffers for the collector, which
 * V8 lets pile up to tens of MiB outside its heap before it looks.
 */
const POOLED_BODY_MAX = 1024 * 1024;
const POOLED_BODIES_PER_SIZE = 32;
const pooledBodies = new Map<number, Buffer[]>();

function takeBody(size: number): Buffer | undefined {
  if (size > POOLED_BODY_MAX) return undefined;
  const capacity = Math.max(4096, 2 ** Math.ceil(Math.log2(size + 1)));
  return pooledBodies.get(capacity)?.pop() ?? Buffer.allocUnsafeSlow(capacity);
}

function releaseBody(body: Buffer | undefined): void {
  if (body === undefined) return;
  const free = pooledBodies.get(body.length) ?? [];
  if (free.length < POOLED_BODIES_PER_SIZE) free.push(body);
  pooledBodies.set(body.length, free);
}

/**
 * Reads a `ByteReader` payload of the announced size straight into one buffer (`pooled`, when
 * given, of at least the size and one byte more; no chunk copies), then checks that nothing
 * follows. A shorter payload is what it is; a longer one
 * comes back as `rest`, the bytes read so far followed by the remainder.
 */
async function readExpected(
  reader: ByteReader,
  size: number,
  signal: AbortSignal | undefined,
  pooled?: Buffer,
): Promise<{ body: Buffer; rest?: AsyncIterable<Uint8Array> }> {
  // One byte more than announced tells a longer source at once.
  const space = pooled ?? Buffer.allocUnsafe(size + 1);
  const body = space.subarray(0, size);
  let filled = 0;
  try {
    while (filled < size) {
      const length = await reader.read(body.subarray(filled));
      if (length === 0) return { body: body.subarray(0, filled) };
      filled += length;
    }
    const probe = space.subarray(size, size + 1);
    const extra = await reader.read(probe);
    if (extra === 0) return { body };
    // The source goes on: its bytes are copied out of a pooled buffer, which goes back.
    const head = Buffer.from(space.subarray(0, size + 1));
    return { body: head.subarray(0, size), rest: continued([head], reader) };
  } catch (error) {
    throw sourceFailure(error, signal);
  }
}

async function* continued(head: Buffer[], reader: ByteReader): AsyncGenerator<Uint8Array> {
  yield* head;
  yield* writeSource(reader) as AsyncIterable<Uint8Array>;
}

function sourceFailure(error: unknown, signal: AbortSignal | undefined): SourceFailure {
  signal?.throwIfAborted();
  const message = error instanceof Error ? error.message : String(error);
  return new SourceFailure(`source stream failed: ${message}`, { cause: error });
}

/** Reads until `limit` bytes or the end; `done` when the payload ended first. */
async function readUpTo(
  chunks: AsyncIterator<Buffer>,
  limit: number,
): Promise<{ bytes: Buffer; done: boolean }> {
  const collected: Buffer[] = [];
  let total = 0;
  while (total < limit) {
    const next = await chunks.next();
    if (next.done) return { bytes: Buffer.concat(collected, total), done: true };
    collected.push(next.value);
    total += next.value.length;
  }
  return { bytes: Buffer.concat(collected, total), done: false };
}

async function* prepend(
  head: Buffer | undefined,
  rest: AsyncIterator<Buffer>,
): AsyncGenerator<Buffer> {
  if (head !== undefined && head.length > 0) yield head;
  for (;;) {
    const next = await rest.next();
    if (next.done) return;
    yield next.value;
  }
}

/**
 * Parts of `partSize` bytes (the last one shorter) read from a `ByteReader` without copies, into
 * buffers from `spare` when it has one.
 */
async function* partsFromReader(
  reader: ByteReader,
  partSize: number,
  spare: Buffer[],
  signal: AbortSignal | undefined,
): AsyncGenerator<Buffer> {
  for (;;) {
    const part = spare.pop() ?? Buffer.allocUnsafe(partSize);
    let filled = 0;
    try {
      while (filled < partSize) {
        const length = await reader.read(part.subarray(filled));
        if (length === 0) break;
        filled += length;
      }
    } catch (error) {
      throw sourceFailure(error, signal);
    }
    if (filled > 0) yield filled === partSize ? part : part.subarray(0, filled);
    if (filled < partSize) return;
  }
}

/** Re-cuts a chunk stream into parts of exactly `partSize` bytes (the last may be shorter). */
async function* partsOf(chunks: AsyncIterable<Buffer>, partSize: number): AsyncGenerator<Buffer> {
  let part = Buffer.allocUnsafe(partSize);
  let filled = 0;
  for await (const chunk of chunks) {
    let offset = 0;
    while (offset < chunk.length) {
      const copied = chunk.copy(
        part,
        filled,
        offset,
        offset + Math.min(partSize - filled, chunk.length - offset),
      );
      filled += copied;
      offset += copied;
      if (filled === partSize) {
        yield part;
        part = Buffer.allocUnsafe(partSize);
        filled = 0;
      }
    }
  }
  if (filled > 0) yield part.subarray(0, filled);
}
