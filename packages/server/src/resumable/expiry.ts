import { acceptedBytesGraceMs, type PartialStore } from "./partial-store.js";

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
 * rather than that it never existed. An accepted one's bytes go a grace after its acceptance
 * (`acceptedBytesGraceMs`), its record a `partial_ttl` after it. What a process that died left
 * half created (no declaration), or a terminated partial's late bytes, go after `partial_ttl` too.
 * A partial that cannot be read or removed now is left for the next sweep; the others still are
 * swept. Returns how many partials' bytes were removed by expiry.
 */
export async function expirePartials(store: PartialStore, ttlMs: number, now = Date.now()) {
  let expired = 0;
  const untouchedSince = async (id: string) =>
    ((await store.lastChanged(id)) ?? Number.NEGATIVE_INFINITY) < now - ttlMs;
  for (const id of await store.ids()) {
    try {
      const partial = await store.read(id);
      if (partial === undefined) {
        if (await untouchedSince(id)) await store.remove(id);
      } else if (partial.accepted !== undefined) {
        if (partial.expiresAt <= now) await store.remove(id);
        else if (
          partial.holdsBytes &&
          (partial.acceptedAt ?? now) + acceptedBytesGraceMs(ttlMs) <= now
        ) {
          await store.dropBytes(partial);
        }
      } else if (partial.expiresAt > now) {
        // Alive.
      } else if (!partial.expired) {
        await store.dropBytes(partial);
        expired += 1;
      } else if (await untouchedSince(id)) await store.remove(id);
    } catch {
      // Left for the next sweep.
    }
  }
  return expired;
}
