import { FileHasher } from "@distributor/bundle";
import {
  type EntryKind,
  isStorageError,
  readFileChunks,
  type StorageBackend,
} from "@distributor/storage";

/** What is stored at a path, as an audit or an adoption compares it with a record. */
export type StoredFile =
  | { kind: "missing" }
  /** A directory, symlink or special file: never a managed output's bytes. */
  | { kind: Exclude<EntryKind, "file">; version?: string | undefined }
  | { kind: "file"; sha256: string; size: number; version: string | undefined };

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
  try {
    ({ kind, version } = await backend.stat(path, { signal }));
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
  return { kind: "file", sha256, size, version };
}

/** How a stored file compares with a record of `sha256` and `size`. */
export function storedStatus(
  stored: StoredFile,
  record: { sha256: string; size: number },
): "ok" | "missing" | "changed" {
  if (stored.kind === "missing") return "missing";
  if (stored.kind !== "file") return "changed";
  return stored.sha256 === record.sha256 && stored.size === record.size ? "ok" : "changed";
}
