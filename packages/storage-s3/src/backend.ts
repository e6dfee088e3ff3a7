import { randomUUID } from "node:crypto";
import type { Readable } from "node:stream";
import { addAbortSignal } from "node:stream";
import {
  AbortMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  type HeadObjectCommandOutput,
  ListMultipartUploadsCommand,
  PutObjectCommand,
  type S3Client,
} from "@aws-sdk/client-s3";
import {
  type DeleteOptions,
  mapBounded,
  type OperationOptions,
  parentPath,
  type ReadOptions,
  type StorageBackend,
  type StorageEntry,
  StorageError,
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
  inferContentType,
  tempFileName,
  versionMismatch,
  type WriteOperation,
} from "@distributor/storage/adapter";
import {
  createClient,
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_REQUEST_TIMEOUT_MS,
  type S3Credentials,
} from "./client.js";
import { deleteKeys } from "./delete.js";
import {
  BACKEND_NAME,
  kindOf,
  s3Error,
  serviceFailure,
  statusOf,
  toStorageError,
} from "./errors.js";
import { KeySpace, versionOf } from "./keys.js";
import { anyKeyBelow, IncompleteListing, listPages, walkKeys } from "./list.js";
import {
  DigestMismatch,
  MemoryBudget,
  type ObjectHeaders,
  PayloadTooLarge,
  SourceFailure,
  type UploadTuning,
  upload,
  WRITE_ID_METADATA,
  type WriteCondition,
} from "./upload.js";

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
const MIN_PART_SIZE = 5 * MIB;
const INSPECT_CONCURRENCY = 16;
/** A managed delete lists its bundle directory when it holds at most this many keys per target. */
const LISTING_PER_TARGET = 8;
const LISTING_MINIMUM = 10_000;

/** A backend over a bucket (and optional prefix) of S3 or an S3-compatible service. */
export function createS3Backend(options: S3BackendOptions): StorageBackend {
  const prefix = options.prefix ?? "";
  validatePrefix(prefix, "open backend", BACKEND_NAME);
  if (!/^[^\s/]+$/.test(options.bucket)) {
    throw s3Error(
      "unavailable",
      "open backend",
      "",
      `invalid bucket name ${JSON.stringify(options.bucket)}`,
    );
  }
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

type ProbeOutcome = { supported: true } | { supported: false; problem: string };

/** What a HEAD after a failed write found at its key. */
type ReadBack =
  | { kind: "object"; version: string | undefined; writeId: string | undefined }
  | { kind: "missing" }
  /** The HEAD failed too: nothing is known. */
  | { kind: "unknown" };

/** The outcome of one fenced delete. */
type FencedDelete = { refused: false } | { refused: true; current: string | undefined };

class S3Operations implements BackendOperations {
  readonly #bucket: string;
  #probe: Promise<ProbeOutcome> | undefined;
  /** Removals of probe objects still in flight; `close` waits for them. */
  readonly #cleanups = new Set<Promise<void>>();

  constructor(
    readonly client: S3Client,
    readonly keys: KeySpace,
    readonly tuning: UploadTuning,
    readonly verifyConditionalWrites: boolean,
  ) {
    this.#bucket = keys.bucket;
  }

  async readFile(path: string, options: ReadOptions): Promise<Uint8Array> {
    return (await this.readVersioned(path, options)).bytes;
  }

  async readVersioned(path: string, options: ReadOptions): Promise<VersionedFile> {
    const response = await this.#get(path, "read file", options.signal);
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
    const response = await this.#get(path, "open reader", options.signal);
    const body = response.Body as Readable;
    return options.signal ? addAbortSignal(options.signal, body) : body;
  }

  async writeFile(
    path: string,
    data: WriteData,
    operation: WriteOperation,
    options: WriteOptions,
  ): Promise<WriteResult> {
    try {
      return await this.#writeFile(path, data, operation, options);
    } finally {
      // The probe object removed meanwhile (see `#probeConditionalWrites`) is gone once the
      // write that needed the probe returns, whatever its outcome: nothing of it is left behind.
      if (this.#cleanups.size > 0) await Promise.all(this.#cleanups);
    }
  }

  async #writeFile(
    path: string,
    data: WriteData,
    operation: WriteOperation,
    options: WriteOptions,
  ): Promise<WriteResult> {
    const { signal } = options;
    const condition: WriteCondition =
      options.ifMatch !== undefined
        ? { kind: "match", etag: options.ifMatch }
        : options.overwrite
          ? { kind: "none" }
          : { kind: "absent" };
    if (condition.kind !== "none") await this.#requireConditionalWrites(operation, path);
    const key = this.keys.key(path);
    // Stored with the object: a write whose answer was lost finds its own id when it reads back.
    const writeId = randomUUID();
    try {
      const result = await upload(
        {
          client: this.client,
          bucket: this.#bucket,
          key,
          contentType: options.contentType ?? inferContentType(path),
          headers: objectHeaders(options),
          condition,
          writeId,
          expectedSha256: options.sha256,
          signal,
          // CompleteMultipartUpload does not enforce conditions everywhere (Ceph RGW ignores
          // If-None-Match there), so a large write checks first; its race window is the upload's.
          beforeMultipart: () => this.#checkCondition(condition, operation, path, signal),
          // A commit (the state, the lease) is a compare-and-swap: one PUT, whose condition the
          // service enforces, however large the file.
          singlePut: options.commit === true,
        },
        data,
        options.size,
        this.tuning,
      );
      // Some services (Ceph RGW for multipart uploads) answer without an ETag; HEAD has it.
      const version = versionOf(result.etag) || (await this.#head(path, signal))?.version;
      if (!version) throw s3Error("unavailable", operation, path, "the service reported no ETag");
      return { version };
    } catch (error) {
      signal?.throwIfAborted();
      // A PUT can be done while its answer is lost: the SDK's retry then meets this write's own
      // object (412 on a conditional write), or the last attempt ends without an answer. The
      // object says which write stored it; ours means the write happened. Nothing else is
      // decided on a guess: another id, no object or a failed HEAD keep the original failure.
      let found: ReadBack | undefined;
      if (mayHaveLanded(error)) {
        found = await this.#readBack(path, signal);
        if (found.kind === "object" && found.writeId === writeId && found.version) {
          return { version: found.version };
        }
      }
      throw await this.#writeFailure(error, condition, operation, path, found);
    }
  }

  async stat(path: string, options: OperationOptions): Promise<StorageEntry> {
    const head = await this.#head(path, options.signal);
    if (head !== undefined) return head;
    if (await this.#isDirectory(path, options.signal)) return { path, kind: "directory", size: 0 };
    throw this.#notFound("stat", path);
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
      this.#isDirectory(prefix, signal),
      this.#head(prefix, signal),
    ]);
    return below || itself !== undefined;
  }

  async deletePaths(
    operation: StorageOperation,
    targets: readonly string[],
    options: DeleteOptions,
  ): Promise<void> {
    const fences = options.ifMatch;
    // A fenced delete HEADs its target anyway (see `#deleteIfMatch`), and one already gone is
    // fine when missing ones are: then only the others are looked at first, so releasing a
    // lease or deleting a few fenced paths lists nothing.
    const headed = (target: string) => options.ignoreMissing === true && fences?.has(target);
    const inspected = targets.filter((target) => !headed(target));
    const kinds = await this.#inspectTargets(inspected, options.signal);
    for (const target of inspected) {
      const kind = kinds.get(target);
      if (kind === "directory") {
        throw s3Error("unsupported", operation, target, "is a directory, not a managed file");
      }
      if (kind === undefined && !options.ignoreMissing) throw this.#notFound(operation, target);
    }
    // Directories are virtual: they vanish with their last key, so `pruneEmptyDirs` is implied.
    const present = targets.filter((target) => headed(target) || kinds.get(target) === "file");
    const fenced = present.filter((target) => fences?.has(target));
    await deleteKeys(
      this.client,
      this.#bucket,
      present.filter((target) => !fences?.has(target)).map((target) => this.keys.key(target)),
      operation,
      targets[0] ?? "",
      options.signal,
    );
    if (fences === undefined || fenced.length === 0) return;
    const refused = new Map<string, string | undefined>();
    await mapBounded(fenced, INSPECT_CONCURRENCY, async (target) => {
      const outcome = await this.#deleteIfMatch(
        target,
        fences.get(target) as string,
        options.signal,
      );
      if (outcome.refused) refused.set(target, outcome.current);
    });
    const first = targets.find((target) => refused.has(target));
    if (first !== undefined) {
      const expected = fences.get(first) as string;
      throw s3Error(
        "conflict",
        operation,
        first,
        `not deleted, the stored version moved on: ${versionMismatch(expected, refused.get(first))}`,
      );
    }
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

  async deletePrefix(prefix: string, options: DeleteOptions): Promise<void> {
    const { signal } = options;
    const operation = "delete prefix";
    const keep = new Set(options.keep ?? []);
    const pending: string[] = [];
    // The root always exists; only a named prefix can be missing.
    let found = prefix === "";
    const flush = async (all: boolean) => {
      while (pending.length >= 1000 || (all && pending.length > 0)) {
        const batch = pending.splice(0, 1000);
        await deleteKeys(this.client, this.#bucket, batch, operation, prefix, signal);
      }
    };
    if (prefix !== "" && (await this.#head(prefix, signal)) !== undefined) {
      found = true;
      pending.push(this.keys.key(prefix));
    }
    const below = this.keys.below(prefix);
    // Page by page: each page's keys are deleted before the next is listed, so memory stays bounded.
    for await (const page of listPages(this.client, this.#bucket, below, { signal })) {
      for (const object of page.objects) {
        if (object.Key === undefined) continue;
        const relative = object.Key.slice(below.length);
        // The root stays, and with it its folder marker.
        if (relative === "" && prefix === "") continue;
        found = true;
        if (keep.has(relative)) continue;
        pending.push(object.Key);
      }
      await flush(false);
    }
    await flush(true);
    if (!found && !options.ignoreMissing) throw this.#notFound(operation, prefix);
  }

  async close(): Promise<void> {
    await Promise.all(this.#cleanups);
    this.client.destroy();
  }

  async #get(path: string, operation: StorageOperation, signal: AbortSignal | undefined) {
    try {
      return await this.client.send(
        new GetObjectCommand({ Bucket: this.#bucket, Key: this.keys.key(path) }),
        { abortSignal: signal },
      );
    } catch (error) {
      if (kindOf(serviceFailure(error)) !== "not_found") throw error;
      if (await this.#isDirectory(path, signal)) {
        throw s3Error("unsupported", operation, path, "is a directory", error);
      }
      throw this.#notFound(operation, path, error);
    }
  }

  /** The file at `path`, or undefined when no object has exactly that key. */
  async #head(path: string, signal: AbortSignal | undefined): Promise<StorageEntry | undefined> {
    let response: HeadObjectCommandOutput;
    try {
      response = await this.client.send(
        new HeadObjectCommand({ Bucket: this.#bucket, Key: this.keys.key(path) }),
        { abortSignal: signal },
      );
    } catch (error) {
      // HEAD has no body, so a missing bucket is a bare 404 too; the listing that usually follows
      // reports it by name.
      if (statusOf(error) === 404) return undefined;
      throw error;
    }
    const entry: StorageEntry = { path, kind: "file", size: response.ContentLength ?? 0 };
    if (response.LastModified !== undefined) entry.modifiedAt = response.LastModified;
    const version = versionOf(response.ETag);
    if (version !== undefined) entry.version = version;
    if (response.ContentType !== undefined) entry.contentType = response.ContentType;
    if (response.CacheControl) entry.cacheControl = response.CacheControl;
    if (response.ContentDisposition) entry.contentDisposition = response.ContentDisposition;
    if (response.ContentEncoding) entry.contentEncoding = response.ContentEncoding;
    return entry;
  }

  /** HEADs a key after a failed write: which write stored the object there, if any. */
  async #readBack(path: string, signal: AbortSignal | undefined): Promise<ReadBack> {
    try {
      const response = await this.client.send(
        new HeadObjectCommand({ Bucket: this.#bucket, Key: this.keys.key(path) }),
        { abortSignal: signal },
      );
      return {
        kind: "object",
        version: versionOf(response.ETag),
        writeId: response.Metadata?.[WRITE_ID_METADATA],
      };
    } catch (error) {
      return statusOf(error) === 404 ? { kind: "missing" } : { kind: "unknown" };
    }
  }

  /**
   * Deletes `path` only while its ETag is `expected`. Ceph RGW as Debian ships it (16.2) ignores
   * `If-Match` on DeleteObject (seen: a wrong ETag still deletes), so the ETag is compared with a
   * HEAD first and the DELETE follows. On such a service this is NOT atomic: a write landing
   * between the HEAD and the DELETE is deleted. The DELETE still carries `If-Match`, so a service
   * that enforces it (AWS S3 documents it) closes that window and answers 412, which counts as moved. An
   * object already gone counts as deleted.
   */
  async #deleteIfMatch(
    path: string,
    expected: string,
    signal: AbortSignal | undefined,
  ): Promise<FencedDelete> {
    const current = (await this.#head(path, signal))?.version;
    if (current === undefined) return { refused: false };
    if (current !== expected) return { refused: true, current };
    const remove = (ifMatch: string | undefined) =>
      this.client.send(
        new DeleteObjectCommand({
          Bucket: this.#bucket,
          Key: this.keys.key(path),
          ...(ifMatch === undefined ? {} : { IfMatch: ifMatch }),
        }),
        { abortSignal: signal },
      );
    try {
      // Bare, as for PUT: Ceph RGW compares If-Match with the unquoted ETag.
      await remove(expected);
    } catch (error) {
      const status = statusOf(error);
      // A retry after a DELETE whose answer was lost finds nothing: deleted.
      if (status === 404) return { refused: false };
      if (status === 412) {
        const now = await this.#head(path, signal).catch(() => undefined);
        return { refused: true, current: now?.version };
      }
      // A service that refuses the header altogether: the HEAD above is the whole check.
      if (!rejectsConditions(error)) throw error;
      await remove(undefined);
    }
    return { refused: false };
  }

  #isDirectory(path: string, signal: AbortSignal | undefined): Promise<boolean> {
    return anyKeyBelow(this.client, this.#bucket, this.keys.below(path), signal);
  }

  #notFound(operation: StorageOperation, path: string, cause?: unknown): StorageError {
    return s3Error("not_found", operation, path, `not found (${this.keys.url(path)})`, cause);
  }

  /**
   * Whether each target is a file, a directory (keys below it) or missing. One listing of the
   * targets' common directory answers all of them when it is small enough; otherwise each target
   * is looked at on its own.
   */
  async #inspectTargets(
    targets: readonly string[],
    signal: AbortSignal | undefined,
  ): Promise<Map<string, "file" | "directory">> {
    const kinds = new Map<string, "file" | "directory">();
    if (targets.length === 0) return kinds;
    const listed = await this.#listCommonDirectory(targets, signal);
    if (listed !== undefined) {
      for (const target of targets) {
        const key = this.keys.key(target);
        if (listed.files.has(key)) kinds.set(target, "file");
        else if (listed.directories.has(key)) kinds.set(target, "directory");
      }
      return kinds;
    }
    await mapBounded(targets, INSPECT_CONCURRENCY, async (target) => {
      if ((await this.#head(target, signal)) !== undefined) kinds.set(target, "file");
      else if (await this.#isDirectory(target, signal)) kinds.set(target, "directory");
    });
    return kinds;
  }

  async #listCommonDirectory(
    targets: readonly string[],
    signal: AbortSignal | undefined,
  ): Promise<{ files: Set<string>; directories: Set<string> } | undefined> {
    const budget = Math.max(LISTING_MINIMUM, targets.length * LISTING_PER_TARGET);
    const common = commonDirectory(targets);
    const files = new Set<string>();
    const directories = new Set<string>();
    for await (const page of listPages(this.client, this.#bucket, this.keys.below(common), {
      signal,
    })) {
      for (const object of page.objects) {
        const key = object.Key;
        if (key === undefined) continue;
        if (!key.endsWith("/")) files.add(key);
        for (let slash = key.indexOf("/"); slash !== -1; slash = key.indexOf("/", slash + 1)) {
          directories.add(key.slice(0, slash));
        }
        if (files.size > budget) return undefined;
      }
    }
    return { files, directories };
  }

  async #requireConditionalWrites(operation: StorageOperation, path: string): Promise<void> {
    if (!this.verifyConditionalWrites) return;
    this.#probe ??= this.#probeConditionalWrites(parentPath(path)).catch((error: unknown) => {
      // A transient failure is not a verdict: the next conditional write probes again.
      this.#probe = undefined;
      throw error;
    });
    const outcome = await this.#probe;
    if (!outcome.supported) throw s3Error("unsupported", operation, path, outcome.problem);
  }

  /**
   * Writes a probe object under a reserved temp name beside the first conditional write, then
   * repeats the create with `If-None-Match: *` and replaces it with `If-Match` on a wrong ETag:
   * both must be refused with 412. A service that accepts them would let two runs race silently.
   */
  async #probeConditionalWrites(directory: string): Promise<ProbeOutcome> {
    const name = tempFileName("conditional-write-probe");
    const key = this.keys.key(directory === "" ? name : `${directory}/${name}`);
    const writeId = randomUUID();
    const put = (headers: { IfNoneMatch?: string; IfMatch?: string }) =>
      this.client.send(
        new PutObjectCommand({
          Bucket: this.#bucket,
          Key: key,
          Body: "distributor conditional-write probe\n",
          ContentType: "text/plain; charset=utf-8",
          Metadata: { [WRITE_ID_METADATA]: writeId },
          ...headers,
        }),
      );
    /** The probe's own create, retried after its answer was lost, meets its own object. */
    const ownObject = async () => {
      const head = await this.client
        .send(new HeadObjectCommand({ Bucket: this.#bucket, Key: key }))
        .catch(() => undefined);
      return head?.Metadata?.[WRITE_ID_METADATA] === writeId;
    };
    const requirement =
      "distributor needs an S3 service that enforces conditional writes (If-None-Match: * and " +
      "If-Match on PUT), as AWS S3 and Ceph RGW do; see docs/integrations/s3.md";
    try {
      await put({ IfNoneMatch: "*" }).catch(async (error: unknown) => {
        if (!(mayHaveLanded(error) && (await ownObject()))) throw error;
      });
    } catch (error) {
      if (rejectsConditions(error)) {
        return {
          supported: false,
          problem: `the service rejects If-None-Match: * (${serviceFailure(error).code}); ${requirement}`,
        };
      }
      throw error;
    }
    try {
      const checks: [string, { IfNoneMatch?: string; IfMatch?: string }][] = [
        ["If-None-Match: * on an existing object", { IfNoneMatch: "*" }],
        ["If-Match with a wrong ETag", { IfMatch: "0123456789abcdef0123456789abcdef" }],
      ];
      // Both at once: each must be refused, so neither changes the object on a service that
      // enforces them, and one round trip answers both.
      const outcomes = await Promise.all(
        checks.map(([, headers]) =>
          put(headers).then(
            () => false,
            (error: unknown) => {
              if (statusOf(error) === 412) return true;
              if (rejectsConditions(error)) return undefined;
              throw error;
            },
          ),
        ),
      );
      for (const [index, [what]] of checks.entries()) {
        const refused = outcomes[index];
        if (refused === false) {
          return {
            supported: false,
            problem: `the service ignores ${what} (it accepted the write); ${requirement}`,
          };
        }
        if (refused === undefined) {
          return { supported: false, problem: `the service rejects ${what}; ${requirement}` };
        }
      }
      return { supported: true };
    } finally {
      // The verdict does not wait for the probe object to go: its removal overlaps the write
      // that asked for the probe, which waits for it before returning (and so does `close`).
      const removal = this.client
        .send(new DeleteObjectCommand({ Bucket: this.#bucket, Key: key }))
        .then(
          () => undefined,
          () => undefined,
        );
      this.#cleanups.add(removal);
      void removal.finally(() => this.#cleanups.delete(removal));
    }
  }

  /** Refuses a multipart write whose condition already fails (see `writeFile`). */
  async #checkCondition(
    condition: WriteCondition,
    operation: StorageOperation,
    path: string,
    signal: AbortSignal | undefined,
  ): Promise<void> {
    if (condition.kind === "none") return;
    const current = (await this.#head(path, signal))?.version;
    if (condition.kind === "absent" && current !== undefined) {
      throw s3Error("already_exists", operation, path);
    }
    if (condition.kind === "match" && current !== condition.etag) {
      throw s3Error("conflict", operation, path, versionMismatch(condition.etag, current));
    }
  }

  async #writeFailure(
    error: unknown,
    condition: WriteCondition,
    operation: StorageOperation,
    path: string,
    found: ReadBack | undefined,
  ): Promise<unknown> {
    if (error instanceof StorageError) return error;
    if (error instanceof SourceFailure) {
      return s3Error("unavailable", operation, path, error.message, error.cause);
    }
    if (error instanceof DigestMismatch) {
      return s3Error("unavailable", operation, path, error.message, error);
    }
    if (error instanceof PayloadTooLarge) {
      return s3Error("limit_exceeded", operation, path, error.message, error);
    }
    const failure = serviceFailure(error);
    if (failure.code === "XAmzContentSHA256Mismatch") {
      return s3Error(
        "unavailable",
        operation,
        path,
        `the service received bytes whose sha256 is not the one the PUT was signed with (${failure.code})`,
        error,
      );
    }
    if (
      condition.kind === "absent" &&
      (failure.status === 412 || failure.code === "PreconditionFailed")
    ) {
      return s3Error("already_exists", operation, path, undefined, error);
    }
    if (condition.kind === "match" && (failure.status === 412 || failure.status === 404)) {
      const current =
        found?.kind === "object"
          ? found.version
          : found?.kind === "missing"
            ? undefined
            : await this.#head(path, undefined).then(
                (entry) => entry?.version,
                () => undefined,
              );
      return s3Error("conflict", operation, path, versionMismatch(condition.etag, current), error);
    }
    if (failure.status === 409 && condition.kind !== "none") {
      return s3Error(
        "conflict",
        operation,
        path,
        `another conditional write to ${this.keys.url(path)} was in progress (${failure.code})`,
        error,
      );
    }
    if (condition.kind !== "none" && rejectsConditions(error)) {
      return s3Error(
        "unsupported",
        operation,
        path,
        `the service rejects conditional writes (${failure.code}); see docs/integrations/s3.md`,
        error,
      );
    }
    return error;
  }
}

/**
 * Whether a failed write may still have stored its object: its answer was lost (reset, timeout,
 * no status), the service failed after taking it (5xx), or a condition failed that a retry of
 * this very write may have broken itself (412, 409; 404 for a multipart completion retried after
 * the upload was completed). Refusals decided before anything was sent do not qualify.
 */
function mayHaveLanded(error: unknown): boolean {
  if (
    error instanceof StorageError ||
    error instanceof SourceFailure ||
    error instanceof DigestMismatch ||
    error instanceof PayloadTooLarge ||
    error instanceof RangeError ||
    error instanceof TypeError
  ) {
    return false;
  }
  const { status } = serviceFailure(error);
  return (
    status === undefined || status >= 500 || status === 404 || status === 409 || status === 412
  );
}

/** A service that does not implement a conditional header says so with 501 (or 400 on some). */
function rejectsConditions(error: unknown): boolean {
  const { code, status } = serviceFailure(error);
  return status === 501 || code === "NotImplemented";
}

/** The deepest directory holding every target. */
function commonDirectory(targets: readonly string[]): string {
  let common = parentPath(targets[0] as string).split("/");
  for (const target of targets.slice(1)) {
    const segments = parentPath(target).split("/");
    let index = 0;
    while (index < common.length && common[index] === segments[index]) index++;
    common = common.slice(0, index);
  }
  return common.join("/");
}

/** The object metadata headers a write asks for, as PutObject / CreateMultipartUpload fields. */
function objectHeaders(options: WriteOptions): ObjectHeaders {
  const headers: ObjectHeaders = {};
  if (options.cacheControl !== undefined) headers.CacheControl = options.cacheControl;
  if (options.contentDisposition !== undefined) {
    headers.ContentDisposition = options.contentDisposition;
  }
  if (options.contentEncoding !== undefined) headers.ContentEncoding = options.contentEncoding;
  return headers;
}
