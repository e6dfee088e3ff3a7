import { FileHasher } from "@distributor/bundle";
import type { OutputMetadata } from "@distributor/state";
import {
  type EntryKind,
  isStorageError,
  readFileChunks,
  type StorageBackend,
  type StorageEntry,
} from "@distributor/storage";

/** What is stored at a path, as an audit or an adoption compares it with a record. */
export type StoredFile =
  | { kind: "missing" }
  /** A directory, symlink or special file: never a managed output's bytes. */
  | { kind: Exclude<EntryKind, "file">; version?: string | undefined }
  | {
      kind: "file";
      sha256: string;
      size: number;
      version: string | undefined;
      /** The object metadata stored with it, from backends that store some (S3, memory). */
      metadata?: StoredMetadata | undefined;
    };

/** Headers a backend that stores object metadata reported for a file (absent: not set). */
export interface StoredMetadata {
  contentType?: string | undefined;
  cacheControl?: string | undefined;
  contentDisposition?: string | undefined;
  contentEncoding?: string | undefined;
}

/**
 * Streams the file at `path` through SHA-256 (one chunk in memory at a time) and returns its
 * digest, size and the version token `stat` showed before the read. A path where nothing is
 * stored is `missing`; a symlink a backend refuses to stat counts as `symlink`.
 */
export async function storedFile(
  backend: StorageBackend,
  path: string,
  signal: AbortSignal | undefined,
): Promise<StoredFile> {
  let kind: EntryKind;
  let version: string | undefined;
  let entry: StorageEntry;
  try {
    entry = await backend.stat(path, { signal });
    ({ kind, version } = entry);
  } catch (error) {
    if (isStorageError(error, "not_found")) return { kind: "missing" };
    if (isStorageError(error, "unsupported")) return { kind: "symlink" };
    throw error;
  }
  if (kind !== "file") return { kind, version };
  const hasher = new FileHasher();
  try {
    await readFileChunks(
      backend,
      path,
      (chunk) => {
        hasher.update(chunk);
        return undefined;
      },
      { signal },
    );
  } catch (error) {
    // Removed between the stat and the read.
    if (isStorageError(error, "not_found")) return { kind: "missing" };
    throw error;
  }
  const { sha256, size } = hasher.digest();
  if (!backend.storesObjectMetadata) return { kind: "file", sha256, size, version };
  const metadata: StoredMetadata = {
    contentType: entry.contentType,
    cacheControl: entry.cacheControl,
    contentDisposition: entry.contentDisposition,
    contentEncoding: entry.contentEncoding,
  };
  return { kind: "file", sha256, size, version, metadata };
}

/**
 * How a stored file compares with a record of `sha256`, `size` and `metadata`: its bytes, and,
 * where the backend reports object metadata, the headers the record says it was stored with.
 */
export function storedStatus(
  stored: StoredFile,
  record: { sha256: string; size: number; metadata?: OutputMetadata | undefined },
): "ok" | "missing" | "changed" {
  if (stored.kind === "missing") return "missing";
  if (stored.kind !== "file") return "changed";
  if (stored.sha256 !== record.sha256 || stored.size !== record.size) return "changed";
  return storedMetadataMatches(stored.metadata, record.metadata) ? "ok" : "changed";
}

/**
 * True when the headers stored with a file are those `expected` describes: the same
 * `Cache-Control`, `Content-Disposition` and `Content-Encoding` (absent where it sets none), and
 * its content type where it overrides one (an inferred type is the backend's business). True when
 * the backend reports no metadata at all (local, SFTP): there is nothing to differ.
 */
export function storedMetadataMatches(
  stored: StoredMetadata | undefined,
  expected: OutputMetadata | undefined,
): boolean {
  if (stored === undefined) return true;
  return (
    stored.cacheControl === expected?.cacheControl &&
    stored.contentDisposition === expected?.contentDisposition &&
    stored.contentEncoding === expected?.contentEncoding &&
    (expected?.contentType === undefined || stored.contentType === expected.contentType)
  );
}
