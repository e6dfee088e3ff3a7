import type { PartialStore } from "./partial-store.js";

/** What the partial uploads of a store hold now, for `/metrics`. */
export async function partialsHeld(
  store: PartialStore,
  now = Date.now(),
): Promise<{ count: number; bytes: number }> {
  let count = 0;
  let bytes = 0;
  for (const id of await store.ids()) {
    const partial = await store.read(id).catch(() => undefined);
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
 * rather than that it never existed; an accepted one's record goes once it expires. What a
 * process that died left half created (no declaration), or a terminated partial's late bytes,
 * go after `partial_ttl` too. Returns how many partials' bytes were removed.
 */
export async function expirePartials(store: PartialStore, ttlMs: number, now = Date.now()) {
  let expired = 0;
  const untouchedSince = async (id: string) =>
    ((await store.lastChanged(id)) ?? Number.NEGATIVE_INFINITY) < now - ttlMs;
  for (const id of await store.ids()) {
    const partial = await store.read(id).catch(() => undefined);
    if (partial === undefined) {
      if (await untouchedSince(id)) await store.remove(id);
      continue;
    }
    if (partial.expiresAt > now) continue;
    if (partial.accepted !== undefined) await store.remove(id);
    else if (!partial.expired) {
      await store.dropBytes(partial);
      expired += 1;
    } else if (await untouchedSince(id)) await store.remove(id);
  }
  return expired;
}
