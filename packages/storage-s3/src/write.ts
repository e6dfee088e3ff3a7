import { randomUUID } from "node:crypto";
import {
  DeleteObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
  type S3Client,
} from "@aws-sdk/client-s3";
import {
  parentPath,
  StorageError,
  type StorageOperation,
  type WriteData,
  type WriteOptions,
  type WriteResult,
} from "@distributor/storage";
import {
  inferContentType,
  tempFileName,
  versionMismatch,
  type WriteOperation,
} from "@distributor/storage/adapter";
import { rejectsConditions, s3Error, serviceFailure, statusOf } from "./errors.js";
import { type KeySpace, versionOf } from "./keys.js";
import type { ReadBack, S3Objects } from "./objects.js";
import { SourceFailure } from "./payload.js";
import {
  DigestMismatch,
  type ObjectHeaders,
  PayloadTooLarge,
  type UploadTuning,
  upload,
  WRITE_ID_METADATA,
  type WriteCondition,
} from "./upload.js";

type ProbeOutcome = { supported: true } | { supported: false; problem: string };

/**
 * Writes of one backend: the upload with its condition, the read-back of a write whose answer
 * was lost, and the one probe that the service enforces conditional writes.
 */
export class S3Writer {
  readonly client: S3Client;
  readonly keys: KeySpace;
  readonly #bucket: string;
  #probe: Promise<ProbeOutcome> | undefined;
  /** Removals of probe objects still in flight; `settled` waits for them. */
  readonly #cleanups = new Set<Promise<void>>();

  constructor(
    readonly objects: S3Objects,
    readonly tuning: UploadTuning,
    readonly verifyConditionalWrites: boolean,
  ) {
    this.client = objects.client;
    this.keys = objects.keys;
    this.#bucket = objects.keys.bucket;
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
      const version = versionOf(result.etag) || (await this.objects.head(path, signal))?.version;
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
        found = await this.objects.readBack(path, signal);
        if (found.kind === "object" && found.writeId === writeId && found.version) {
          return { version: found.version };
        }
      }
      throw await this.#writeFailure(error, condition, operation, path, found);
    }
  }

  /** Resolves once no probe object is being removed any more (see `#probeConditionalWrites`). */
  async settled(): Promise<void> {
    await Promise.all(this.#cleanups);
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
    const current = (await this.objects.head(path, signal))?.version;
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
            : await this.objects.head(path, undefined).then(
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
