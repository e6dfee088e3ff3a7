import { createHash, type Hash } from "node:crypto";
import { Transform, type TransformCallback } from "node:stream";
import { compareLogicalPaths } from "@distributor/storage";

/** Digest strings are `sha256:` followed by 64 lowercase hex digits. */
export const SHA256_PATTERN = /^sha256:[0-9a-f]{64}$/;

/** The SHA-256 and byte count of one file's content. */
export interface FileDigest {
  /** `sha256:<64 lowercase hex>` */
  sha256: string;
  size: number;
}

/** What the bundle digest covers for each file. */
export interface DigestedFile {
  path: string;
  sha256: string;
  size: number;
}

export function isSha256Digest(value: string): boolean {
  return SHA256_PATTERN.test(value);
}

/** Incremental file digest: feed chunks as they arrive, never the whole file at once. */
export class FileHasher {
  readonly #hash: Hash = createHash("sha256");
  #size = 0;

  update(chunk: Uint8Array): void {
    this.#hash.update(chunk);
    this.#size += chunk.byteLength;
  }

  /** Bytes seen so far. */
  get size(): number {
    return this.#size;
  }

  /** Finishes the hash; the hasher cannot be updated afterwards. */
  digest(): FileDigest {
    return { sha256: `sha256:${this.#hash.digest("hex")}`, size: this.#size };
  }
}

/**
 * A pass-through stream that hashes and counts the bytes flowing through it, so a copy can be
 * verified without reading the source twice. `result` is available once the stream has ended.
 */
export class DigestStream extends Transform {
  readonly #hasher = new FileHasher();
  #result: FileDigest | undefined;

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.#hasher.update(chunk);
    callback(null, chunk);
  }

  override _flush(callback: TransformCallback): void {
    this.#result = this.#hasher.digest();
    callback();
  }

  /** Bytes that have passed through so far. */
  get bytes(): number {
    return this.#hasher.size;
  }

  get result(): FileDigest {
    if (this.#result === undefined)
      throw new Error("digest is available only after the stream ends");
    return this.#result;
  }
}

export function createDigestStream(): DigestStream {
  return new DigestStream();
}

/** Digest of bytes already in memory (small content such as generated HTML or tests). */
export function fileDigest(content: Uint8Array | string): FileDigest {
  const hasher = new FileHasher();
  hasher.update(typeof content === "string" ? Buffer.from(content, "utf8") : content);
  return hasher.digest();
}

/**
 * Hashes everything a stream yields; memory stays at one chunk whatever the size. A fired signal
 * rejects with its reason, also when the source failed because of it.
 */
export async function digestStream(
  source: AsyncIterable<Uint8Array>,
  options: { signal?: AbortSignal } = {},
): Promise<FileDigest> {
  return (await hashSource(source, Number.POSITIVE_INFINITY, options.signal)).digest();
}

/**
 * Like `digestStream`, but stops once the source yields more than `maxBytes` and returns
 * undefined: a file that keeps growing while it is read must not keep a bounded check reading.
 */
export async function digestAtMost(
  source: AsyncIterable<Uint8Array>,
  maxBytes: number,
  signal: AbortSignal | undefined,
): Promise<FileDigest | undefined> {
  const hasher = await hashSource(source, maxBytes, signal);
  return hasher.size > maxBytes ? undefined : hasher.digest();
}

type Destroyable = { destroy?: (error?: unknown) => void };

/** Feeds the source to a hasher until it ends or passes `maxBytes`; the source is destroyed after. */
async function hashSource(
  source: AsyncIterable<Uint8Array>,
  maxBytes: number,
  signal: AbortSignal | undefined,
): Promise<FileHasher> {
  const hasher = new FileHasher();
  const destroy = (error?: unknown) => (source as Destroyable).destroy?.(error);
  // A source that ignores the signal would otherwise keep us waiting for its next chunk.
  const onAbort = () => destroy(signal?.reason);
  signal?.addEventListener("abort", onAbort, { once: true });
  try {
    signal?.throwIfAborted();
    for await (const chunk of source) {
      signal?.throwIfAborted();
      hasher.update(chunk);
      if (hasher.size > maxBytes) break;
    }
    return hasher;
  } catch (error) {
    // Streams bound to the signal fail with their own AbortError; report the caller's reason.
    signal?.throwIfAborted();
    throw error;
  } finally {
    signal?.removeEventListener("abort", onAbort);
    destroy();
  }
}

/**
 * The text the bundle digest hashes (SPEC §4): one line `<sha256> <size> <path>\n` per file, in
 * ascending UTF-8 byte order of path.
 */
export function bundleDigestText(files: readonly DigestedFile[]): string {
  return sortedForDigest(files).map(digestLine).join("");
}

/** `sha256:` + SHA-256 of `bundleDigestText(files)` as UTF-8, computed line by line. */
export function bundleDigest(files: readonly DigestedFile[]): string {
  const hash = createHash("sha256");
  for (const file of sortedForDigest(files)) hash.update(digestLine(file), "utf8");
  return `sha256:${hash.digest("hex")}`;
}

function sortedForDigest(files: readonly DigestedFile[]): DigestedFile[] {
  return [...files].sort((a, b) => compareLogicalPaths(a.path, b.path));
}

function digestLine(file: DigestedFile): string {
  return `${file.sha256} ${file.size} ${file.path}\n`;
}
