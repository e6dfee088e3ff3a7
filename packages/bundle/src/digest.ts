import { createHash, type Hash } from "node:crypto";
import { Transform, type TransformCallback } from "node:stream";
import {
  compareLogicalPaths,
  consumeChunks,
  readFileChunks,
  type StorageBackend,
} from "@distributor/storage";

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
  // The pattern's test by hand: a state or manifest checks one or two per file (`SHA256_PATTERN`).
  if (typeof value !== "string" || value.length !== 71 || !value.startsWith("sha256:")) {
    return SHA256_PATTERN.test(value);
  }
  for (let index = 7; index < 71; index++) {
    const code = value.charCodeAt(index);
    // 0-9 or a-f
    if (!((code >= 0x30 && code <= 0x39) || (code >= 0x61 && code <= 0x66))) return false;
  }
  return true;
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
  const hasher = new FileHasher();
  await consumeChunks(source, (chunk) => void hasher.update(chunk), options.signal);
  return hasher.digest();
}

/**
 * The digest of a stored file, read with `readFileChunks` (no stream where the backend can do
 * without); undefined once more than `maxBytes` arrived, which stops the read.
 */
export async function digestFileAtMost(
  backend: StorageBackend,
  path: string,
  maxBytes: number,
  signal: AbortSignal | undefined,
): Promise<FileDigest | undefined> {
  const hasher = new FileHasher();
  await readFileChunks(
    backend,
    path,
    (chunk) => {
      hasher.update(chunk);
      return hasher.size <= maxBytes;
    },
    { signal },
  );
  return hasher.size > maxBytes ? undefined : hasher.digest();
}

/**
 * The text the bundle digest hashes (docs/design/bundles.md): one line `<sha256> <size> <path>\n` per file, in
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

/** The digest lines of `files` as they are ordered: callers hash files already in canonical order. */
export function digestLinesInOrder(files: readonly DigestedFile[]): string {
  return files.map(digestLine).join("");
}

function sortedForDigest(files: readonly DigestedFile[]): DigestedFile[] {
  return [...files].sort((a, b) => compareLogicalPaths(a.path, b.path));
}

function digestLine(file: DigestedFile): string {
  return `${file.sha256} ${file.size} ${file.path}\n`;
}
