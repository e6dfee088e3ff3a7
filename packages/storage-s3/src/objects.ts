import {
  GetObjectCommand,
  HeadObjectCommand,
  type HeadObjectCommandOutput,
  type S3Client,
} from "@aws-sdk/client-s3";
import type { StorageEntry, StorageError, StorageOperation } from "@distributor/storage";
import { kindOf, s3Error, serviceFailure, statusOf } from "./errors.js";
import { type KeySpace, versionOf } from "./keys.js";
import { anyKeyBelow } from "./list.js";
import { WRITE_ID_METADATA } from "./upload.js";

/** What a HEAD after a failed write found at its key. */
export type ReadBack =
  | { kind: "object"; version: string | undefined; writeId: string | undefined }
  | { kind: "missing" }
  /** The HEAD failed too: nothing is known. */
  | { kind: "unknown" };

/** The single-object lookups (GET, HEAD, "is it a directory") that reads, writes and deletes share. */
export class S3Objects {
  readonly #bucket: string;

  constructor(
    readonly client: S3Client,
    readonly keys: KeySpace,
  ) {
    this.#bucket = keys.bucket;
  }

  async get(path: string, operation: StorageOperation, signal: AbortSignal | undefined) {
    try {
      return await this.client.send(
        new GetObjectCommand({ Bucket: this.#bucket, Key: this.keys.key(path) }),
        { abortSignal: signal },
      );
    } catch (error) {
      if (kindOf(serviceFailure(error)) !== "not_found") throw error;
      if (await this.isDirectory(path, signal)) {
        throw s3Error("unsupported", operation, path, "is a directory", error);
      }
      throw this.notFound(operation, path, error);
    }
  }

  /** The file at `path`, or undefined when no object has exactly that key. */
  async head(path: string, signal: AbortSignal | undefined): Promise<StorageEntry | undefined> {
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
  async readBack(path: string, signal: AbortSignal | undefined): Promise<ReadBack> {
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

  isDirectory(path: string, signal: AbortSignal | undefined): Promise<boolean> {
    return anyKeyBelow(this.client, this.#bucket, this.keys.below(path), signal);
  }

  notFound(operation: StorageOperation, path: string, cause?: unknown): StorageError {
    return s3Error("not_found", operation, path, `not found (${this.keys.url(path)})`, cause);
  }
}
