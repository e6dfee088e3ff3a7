import { isReleaseId } from "@distributor/state";
import { isStorageError, joinPrefix, relativeTo, type StorageBackend } from "@distributor/storage";
import { RELEASES_DIRECTORY, releasesPrefix } from "./layout.js";

/**
 * Which releases went live (docs/design/releases.md, live records): before `current` is switched
 * to a release, `releases/<id>.live.json` is written. A staged release that was never promoted has
 * none, so "the release before" (`rollback --previous`, and the one retention keeps for it) is
 * never a release nobody approved.
 */
const SUFFIX = ".live.json";

/** Entries directly in `releases/` read at once (as `storedReleases` reads them). */
const LISTING_LIMIT = 100_000;

export function liveRecordPath(bundlePath: string, id: string): string {
  return joinPrefix(bundlePath, `${RELEASES_DIRECTORY}/${id}${SUFFIX}`);
}

/**
 * Notes that release `id` is about to go live, unless it went live before (a record is written
 * once: `live_at` is when it first went live, and a rollback to it writes nothing).
 */
export async function writeLiveRecord(
  backend: StorageBackend,
  bundlePath: string,
  id: string,
  now: Date,
  signal?: AbortSignal,
): Promise<void> {
  const path = liveRecordPath(bundlePath, id);
  try {
    await backend.stat(path, { signal });
    return;
  } catch (error) {
    if (!isStorageError(error, "not_found")) throw error;
  }
  const body = `${JSON.stringify({ release: id, live_at: now.toISOString() })}\n`;
  try {
    await backend.writeFile(path, body, {
      overwrite: false,
      contentType: "application/json",
      signal,
    });
  } catch (error) {
    if (!isStorageError(error, "already_exists")) throw error;
  }
}

/**
 * Of `committed` (ids, oldest first), those that went live: every one with a live record, and
 * every one older than the oldest record (what went live before records were kept counts as it
 * always did; with no record at all, every release does).
 */
export async function wentLive(
  backend: StorageBackend,
  bundlePath: string,
  committed: readonly string[],
  signal?: AbortSignal,
): Promise<string[]> {
  const recorded = await liveRecords(backend, bundlePath, signal);
  const oldest = [...recorded].sort()[0];
  if (oldest === undefined) return [...committed];
  return committed.filter((id) => recorded.has(id) || id < oldest);
}

/** The releases with a live record (their ids). */
export async function liveRecords(
  backend: StorageBackend,
  bundlePath: string,
  signal?: AbortSignal,
): Promise<Set<string>> {
  const prefix = releasesPrefix(bundlePath);
  let entries: Awaited<ReturnType<StorageBackend["walk"]>>;
  try {
    entries = await backend.walk(prefix, { limit: LISTING_LIMIT, signal });
  } catch (error) {
    if (isStorageError(error, "not_found")) return new Set();
    throw error;
  }
  const ids = new Set<string>();
  for (const entry of entries) {
    const name = relativeTo(prefix, entry.path);
    if (entry.kind !== "file" || !name.endsWith(SUFFIX)) continue;
    const id = name.slice(0, -SUFFIX.length);
    if (isReleaseId(id)) ids.add(id);
  }
  return ids;
}
