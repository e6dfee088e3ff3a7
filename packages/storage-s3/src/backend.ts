import type { Readable } from "node:stream";
import { addAbortSignal } from "node:stream";
import {
  AbortMultipartUploadCommand,
  ListMultipartUploadsCommand,
  type S3Client,
} from "@aws-sdk/client-s3";
import {
  ConfigError,
  type DeleteOptions,
  mapBounded,
  type OperationOptions,
  type ReadOptions,
  type StorageBackend,
  type StorageEntry,
  type StorageOperation,
  type VersionedFile,
  validatePrefix,
  type WalkOptions,
  type WriteData,
  type WriteOptions,
  type WriteResult,
} from "@distributor/storage";
import {
  type BackendOperations,
  frameBackend,
  shown,
  type WriteOperation,
} from "@distributor/storage/adapter";
import {
  createClient,
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_REQUEST_TIMEOUT_MS,
  type S3Credentials,
} from "./client.js";
import { INSPECT_CONCURRENCY, S3Deletes } from "./delete.js";
import { BACKEND_NAME, s3Error, statusOf, toStorageError } from "./errors.js";
import { KeySpace, versionOf } from "./keys.js";
import { IncompleteListing, listPages, walkKeys } from "./list.js";
import { MemoryBudget } from "./memory-budget.js";
import { S3Objects } from "./objects.js";
import type { UploadTuning } from "./upload.js";
import { S3Writer } from "./write.js";

export interface S3BackendOptions {
  bucket: string;
  /** Logical prefix inside the bucket every key is confined to; `""` (default) is the bucket root. */
  prefix?: string;
  /** Default `us-east-1`. */
  region?: string;
  /** URL of an S3-compatible service (Ceph RGW, MinIO, R2, ...); absent for AWS. */
  endpoint?: string;
  /** Address buckets as `endpoint/bucket` instead of `bucket.endpoint`. Default false. */
  forcePathStyle?: boolean;
  /** Absent: the SDK's default credential chain (environment, profile, instance role, ...). */
  credentials?: S3Credentials;
  /**
   * Attempts per request, retries included (SDK adaptive retry mode). Default 3. A retried
   * conditional write that meets its own earlier attempt is recognised by its write id (see
   * `writeFile`), so retries stay safe for the commit protocol's writes.
   */
  maxAttempts?: number;
  /**
   * Milliseconds a connection to the service may take to open before the attempt fails.
   * Default `DEFAULT_CONNECT_TIMEOUT_MS` (10 000).
   */
  connectTimeoutMs?: number;
  /**
   * Milliseconds one request may go without an answer or any progress (no byte sent or
   * received: a stalled upload, an answer that never comes, a download that stops) before it
   * fails with `unavailable` ("timed out"). Not a bound on a request that keeps moving bytes.
   * Default `DEFAULT_REQUEST_TIMEOUT_MS` (30 000).
   */
  requestTimeoutMs?: number;
  /** Payloads up to this many bytes are one PUT; larger ones go in parts. Default 8 MiB. */
  multipartThreshold?: number;
  /** Bytes per multipart part (at least 5 MiB). Default 8 MiB. */
  partSize?: number;
  /** Parts uploaded at once. Default 4. */
  partConcurrency?: number;
  /**
   * Check once, before the first conditional write, that the service enforces `If-None-Match: *`
   * and `If-Match` (a probe object under a temp name beside the write). Default true.
   */
  verifyConditionalWrites?: boolean;
}

const MIB = 1024 * 1024;
/** What all uploads of one backend buffer at once, at most, with the default part settings. */
const UPLOAD_MEMORY_BYTES = 48 * MIB;
/** Outputs written at once by default (a destination's `transfers` overrides it). */
const S3_WRITE_CONCURRENCY = 16;
/** The smallest part S3 accepts (the last part of an upload excepted). */
export const MIN_PART_SIZE = 5 * MIB;

/**
 * What a bucket name must be here. Looser than AWS's rules for new buckets (3–63 lowercase
 * letters, digits, dots and hyphens): older AWS buckets and S3-compatible services allow more,
 * and the service itself refuses what it does not hold; a name that could never address a
 * bucket is refused before any request.
 */
export const BUCKET_RULE = "1 to 255 characters, without / or whitespace";

/** Why `bucket` cannot be a bucket name, or undefined. */
export function bucketProblem(bucket: unknown): string | undefined {
  if (typeof bucket !== "string") return `must be a string, not ${shown(bucket)}`;
  if (!/^[^\s/]{1,255}$/.test(bucket)) {
    return `${JSON.stringify(bucket)} is not a bucket name (${BUCKET_RULE})`;
  }
  return undefined;
}

/** A backend over a bucket (and optional prefix) of S3 or an S3-compatible service. */
export function createS3Backend(options: S3BackendOptions): StorageBackend {
  const prefix = options.prefix ?? "";
  validatePrefix(prefix, "open backend", BACKEND_NAME);
  const problem = bucketProblem(options.bucket);
  if (problem !== undefined) throw new ConfigError("s3 backend", [`bucket ${problem}`]);
  const partSize = options.partSize ?? 8 * MIB;
  if (partSize < MIN_PART_SIZE) throw new RangeError(`partSize must be at least ${MIN_PART_SIZE}`);
  const connectTimeoutMs = timeoutOption(
    "connectTimeoutMs",
    options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
  );
  const requestTimeoutMs = timeoutOption(
    "requestTimeoutMs",
    options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS,
  );
  const keys = new KeySpace(options.bucket, prefix);
  const client = createClient({
    region: options.region ?? "us-east-1",
    endpoint: options.endpoint,
    forcePathStyle: options.forcePathStyle ?? false,
    credentials: options.credentials,
    maxAttempts: options.maxAttempts ?? 3,
    connectTimeoutMs,
    requestTimeoutMs,
  });
  const partConcurrency = Math.max(1, options.partConcurrency ?? 4);
  const tuning: UploadTuning = {
    multipartThreshold: options.multipartThreshold ?? 8 * MIB,
    partSize,
    partConcurrency,
    // Room for one large object's parts in flight and a margin of small ones beside it.
    memory: new MemoryBudget(
      Math.max(UPLOAD_MEMORY_BYTES, (partConcurrency + 1) * partSize + 8 * MIB),
    ),
  };
  const location = `${BACKEND_NAME}://${options.bucket}${prefix === "" ? "" : `/${prefix}`}`;
  return frameBackend(
    {
      name: BACKEND_NAME,
      location,
      // ETags of single PUTs are MD5s of the bytes: the same bytes give the same version.
      versionsMayRepeat: true,
      storesObjectMetadata: true,
      // S3 keys are at most 1 024 bytes of UTF-8, the prefix and its slash included.
      maxPathBytes: MAX_KEY_BYTES - (prefix === "" ? 0 : Buffer.byteLength(prefix) + 1),
      // Each write waits a round trip for its answer: across 20–80 ms many must be in flight.
      writeConcurrency: S3_WRITE_CONCURRENCY,
      mapError: (error, operation, path) =>
        toStorageError(error, operation, path, {
          bucket: options.bucket,
          key: keys.key(path),
          connectTimeoutMs,
          requestTimeoutMs,
        }),
    },
    new S3Operations(client, keys, tuning, options.verifyConditionalWrites ?? true),
  );
}

/** The longest key S3 stores (UTF-8 bytes). */
const MAX_KEY_BYTES = 1_024;

/** A timeout in milliseconds: a positive integer (0 would mean "wait forever" to the SDK). */
function timeoutOption(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new RangeError(`${name} must be a positive number of milliseconds, not ${value}`);
  }
  return value;
}

class S3Operations implements BackendOperations {
  readonly #bucket: string;
  readonly #objects: S3Objects;
  readonly #writer: S3Writer;
  readonly #deletes: S3Deletes;

  constructor(
    readonly client: S3Client,
    readonly keys: KeySpace,
    tuning: UploadTuning,
    verifyConditionalWrites: boolean,
  ) {
    this.#bucket = keys.bucket;
    this.#objects = new S3Objects(client, keys);
    this.#writer = new S3Writer(this.#objects, tuning, verifyConditionalWrites);
    this.#deletes = new S3Deletes(this.#objects);
  }

  async readFile(path: string, options: ReadOptions): Promise<Uint8Array> {
    return (await this.readVersioned(path, options)).bytes;
  }

  async readVersioned(path: string, options: ReadOptions): Promise<VersionedFile> {
    const response = await this.#objects.get(path, "read file", options.signal);
    const body = response.Body as Readable;
    const { maxBytes } = options;
    const tooLarge = () =>
      s3Error("limit_exceeded", "read file", path, `file is larger than ${maxBytes} bytes`);
    if (maxBytes !== undefined && (response.ContentLength ?? 0) > maxBytes) {
      body.destroy();
      throw tooLarge();
    }
    const chunks: Buffer[] = [];
    let total = 0;
    for await (const chunk of body) {
      const buffer = chunk as Buffer;
      total += buffer.length;
      if (maxBytes !== undefined && total > maxBytes) {
        body.destroy();
        throw tooLarge();
      }
      chunks.push(buffer);
    }
    return {
      bytes: new Uint8Array(Buffer.concat(chunks, total)),
      version: versionOf(response.ETag) ?? "",
    };
  }

  async openRead(path: string, options: OperationOptions): Promise<Readable> {
    const response = await this.#objects.get(path, "open reader", options.signal);
    const body = response.Body as Readable;
    return options.signal ? addAbortSignal(options.signal, body) : body;
  }

  writeFile(
    path: string,
    data: WriteData,
    operation: WriteOperation,
    options: WriteOptions,
  ): Promise<WriteResult> {
    return this.#writer.writeFile(path, data, operation, options);
  }

  async stat(path: string, options: OperationOptions): Promise<StorageEntry> {
    const head = await this.#objects.head(path, options.signal);
    if (head !== undefined) return head;
    if (await this.#objects.isDirectory(path, options.signal))
      return { path, kind: "directory", size: 0 };
    throw this.#objects.notFound("stat", path);
  }

  walk(prefix: string, options: WalkOptions): Promise<StorageEntry[]> {
    return walkKeys(this.client, this.keys, prefix, {
      recursive: options.recursive ?? false,
      limit: options.limit,
      signal: options.signal,
    });
  }

  async hasAny(prefix: string, options: OperationOptions): Promise<boolean> {
    const { signal } = options;
    if (prefix === "") {
      for await (const page of listPages(this.client, this.#bucket, this.keys.base, {
        pageSize: 2,
        signal,
      })) {
        // The root's own folder marker is not content.
        return page.objects.some((object) => object.Key !== this.keys.base);
      }
      return false;
    }
    const [below, itself] = await Promise.all([
      this.#objects.isDirectory(prefix, signal),
      this.#objects.head(prefix, signal),
    ]);
    return below || itself !== undefined;
  }

  deletePaths(
    operation: StorageOperation,
    targets: readonly string[],
    options: DeleteOptions,
  ): Promise<void> {
    return this.#deletes.deletePaths(operation, targets, options);
  }

  /**
   * Aborts the unfinished multipart uploads of exactly these paths (ListMultipartUploads with the
   * key as prefix, page by page; uploads of longer keys that merely start with it stay).
   */
  async abortUploads(paths: readonly string[], options: OperationOptions): Promise<number> {
    const { signal } = options;
    const counts = await mapBounded(paths, INSPECT_CONCURRENCY, async (path) => {
      const key = this.keys.key(path);
      let aborted = 0;
      let keyMarker: string | undefined;
      let uploadIdMarker: string | undefined;
      for (;;) {
        const page = await this.client.send(
          new ListMultipartUploadsCommand({
            Bucket: this.#bucket,
            Prefix: key,
            KeyMarker: keyMarker,
            UploadIdMarker: uploadIdMarker,
          }),
          { abortSignal: signal },
        );
        const ids = (page.Uploads ?? []).flatMap((pending) =>
          pending.Key === key && pending.UploadId !== undefined ? [pending.UploadId] : [],
        );
        await mapBounded(ids, INSPECT_CONCURRENCY, async (uploadId) => {
          try {
            await this.client.send(
              new AbortMultipartUploadCommand({
                Bucket: this.#bucket,
                Key: key,
                UploadId: uploadId,
              }),
              { abortSignal: signal },
            );
            aborted += 1;
          } catch (error) {
            // Completed or aborted by someone else since the listing: nothing left to abort.
            if (statusOf(error) !== 404) throw error;
          }
        });
        if (!page.IsTruncated) return aborted;
        keyMarker = page.NextKeyMarker;
        uploadIdMarker = page.NextUploadIdMarker;
        if (!keyMarker && !uploadIdMarker) {
          throw new IncompleteListing(
            `multipart upload listing truncated without a next marker (s3://${this.#bucket}/${key})`,
          );
        }
      }
    });
    return counts.reduce((sum, count) => sum + count, 0);
  }

  deletePrefix(prefix: string, options: DeleteOptions): Promise<void> {
    return this.#deletes.deletePrefix(prefix, options);
  }

  async close(): Promise<void> {
    await this.#writer.settled();
    this.client.destroy();
  }
}
