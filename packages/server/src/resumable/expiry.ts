import { stat } from "node:fs/promises";
import { join } from "node:path";
import {
  dropBytes,
  PARTIAL_DIRECTORY_PREFIX,
  partialIds,
  readPartial,
  removePartial,
} from "./partials.js";

/** What the partial uploads in a staging root hold now, for `/metrics`. */
export async function partialsHeld(
  root: string,
  ttlMs: number,
  now = Date.now(),
): Promise<{ count: number; bytes: number }> {
  let count = 0;
  let bytes = 0;
  for (const id of await partialIds(root)) {
    const partial = await readPartial(root, id, ttlMs).catch(() => undefined);
    if (partial === undefined || partial.accepted !== undefined || partial.expired) continue;
    if (partial.expiresAt <= now) continue;
    count += 1;
    bytes += partial.offset;
  }
  return { count, bytes };
}

/**
 * Expires partial uploads: the bytes of one whose `partial_ttl` passed since its last bytes are
 * removed, its declaration kept one more `partial_ttl` so a late resume is told it expired (410)
 * rather than that it never existed; an accepted one's record goes once it expires. A directory
 * left half created (no declaration) by a process that died goes after `partial_ttl` too.
 * Returns how many partials' bytes were removed.
 */
export async function expirePartials(root: string, ttlMs: number, now = Date.now()) {
  let expired = 0;
  for (const id of await partialIds(root)) {
    const directory = join(root, `${PARTIAL_DIRECTORY_PREFIX}${id}`);
    const partial = await readPartial(root, id, ttlMs).catch(() => undefined);
    if (partial === undefined) {
      if (await changedBefore(directory, now - ttlMs)) await removePartial(directory);
      continue;
    }
    if (partial.expiresAt > now) continue;
    if (partial.accepted !== undefined) await removePartial(directory);
    else if (!partial.expired) {
      await dropBytes(partial);
      expired += 1;
    } else if (await changedBefore(directory, now - ttlMs)) await removePartial(directory);
  }
  return expired;
}

async function changedBefore(path: string, cutoff: number): Promise<boolean> {
  const found = await stat(path).catch(() => undefined);
  return found !== undefined && found.mtimeMs < cutoff;
}
