import { peekSourceDigest } from "@distributor/state";
import { isStorageError, readFileChunks, type StorageBackend } from "@distributor/storage";
import { snapshotPath } from "./layout.js";

/** The head of a snapshot read to find its source: the owner, times and manifest header. */
const HEAD_BYTES = 16 * 1024;

/**
 * The digest of the source release `id` published, from the head of its snapshot (a snapshot
 * may be megabytes; only its first kilobytes are read). Undefined when the snapshot is missing
 * or does not show one.
 */
export async function releaseSource(
  backend: StorageBackend,
  bundlePath: string,
  id: string,
  signal?: AbortSignal,
): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let length = 0;
  try {
    await readFileChunks(
      backend,
      snapshotPath(bundlePath, id),
      (chunk) => {
        // A chunk is valid only during the call: keep a copy.
        chunks.push(Buffer.from(chunk));
        length += chunk.byteLength;
        return length < HEAD_BYTES;
      },
      { signal },
    );
  } catch (error) {
    if (isStorageError(error, "not_found")) return undefined;
    throw error;
  }
  return peekSourceDigest(Buffer.concat(chunks, length));
}

/**
 * Of `committed` (ids, oldest first), the newest release older than `live` that published
 * another source than `live` did: the publication before the one in force. Releases of the same
 * source — a repair writes one, as does publishing that source again — are passed over.
 */
export async function previousPublication(
  backend: StorageBackend,
  bundlePath: string,
  committed: readonly string[],
  live: string,
  signal?: AbortSignal,
): Promise<string | undefined> {
  const liveSource = await releaseSource(backend, bundlePath, live, signal);
  const older = committed.filter((id) => id < live).reverse();
  for (const id of older) {
    const source = await releaseSource(backend, bundlePath, id, signal);
    if (liveSource === undefined || source === undefined || source !== liveSource) return id;
  }
  return undefined;
}
