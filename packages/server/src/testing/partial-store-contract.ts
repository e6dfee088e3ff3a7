import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { expirePartials } from "../resumable/expiry.js";
import type {
  Partial,
  PartialInfo,
  PartialLock,
  PartialStore,
} from "../resumable/partial-store.js";

// What every place a partial upload lives keeps (docs/design/upload-service.md, "Resumable
// uploads"): the staging directory and S3 staging run these same cases against their own real
// storage (a temporary directory in the server's suites, Ceph RGW in the end-to-end package).

export interface PartialStoreFixture {
  store: PartialStore;
  /** The `partial_ttl` the store was opened with. */
  ttlMs: number;
  /** What the storage itself says the partial holds from 0, read around the store. */
  heldBytes(id: string): Promise<number>;
  close(): Promise<void>;
}

const held: PartialLock = { refresh: async () => true, release: async () => undefined };

export function declaration(length: number, id = randomBytes(18).toString("base64url")) {
  return {
    id,
    tokenId: "reporter",
    pipelineId: "reports",
    key: null,
    length,
    contentType: "application/x-tar",
    sha256: null,
    createdAt: Date.now(),
    incarnation: randomBytes(6).toString("hex"),
  } satisfies PartialInfo;
}

async function append(store: PartialStore, partial: Partial, offset: number, bytes: Buffer) {
  const writer = await store.openWriter(partial, offset, held);
  try {
    for (let at = 0; at < bytes.length; at += 64 * 1024) {
      await writer.write(bytes.subarray(at, at + 64 * 1024));
    }
    return await writer.commit();
  } finally {
    await writer.close();
  }
}

async function archiveOf(store: PartialStore, partial: Partial): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  for await (const part of store.archive(partial)) parts.push(part);
  return Buffer.concat(parts);
}

export function partialStoreContract(name: string, open: () => Promise<PartialStoreFixture>) {
  describe(`partial store contract: ${name}`, () => {
    it("creates once, appends in pieces, reports exactly what it holds, reads the archive back", async () => {
      const { store, heldBytes, close } = await open();
      try {
        const bytes = randomBytes(9 * 1024 * 1024 + 123);
        const info = declaration(bytes.length);
        expect(await store.create(info)).toBe(true);
        expect(await store.create(info)).toBe(false);
        expect(await store.ids()).toContain(info.id);
        let partial = (await store.read(info.id)) as Partial;
        expect(partial).toMatchObject({ offset: 0, expired: false, accepted: undefined });
        const cut = 5 * 1024 * 1024 + 7;
        expect(await append(store, partial, 0, bytes.subarray(0, cut))).toBe(cut);
        partial = (await store.read(info.id)) as Partial;
        expect(partial.offset).toBe(cut);
        expect(await heldBytes(info.id)).toBe(cut);
        expect(await append(store, partial, cut, bytes.subarray(cut))).toBe(bytes.length);
        partial = (await store.read(info.id)) as Partial;
        expect(partial.offset).toBe(bytes.length);
        expect((await archiveOf(store, partial)).equals(bytes)).toBe(true);
        const accepted = { run_id: "run-1" } as never;
        await store.markAccepted(partial, accepted);
        expect(await store.read(info.id)).toMatchObject({ accepted, offset: bytes.length });
        // A completion that raced this one may still be reading: the bytes stay for a grace.
        expect(await heldBytes(info.id)).toBe(bytes.length);
        expect((await archiveOf(store, partial)).equals(bytes)).toBe(true);
        await store.remove(info.id);
        expect(await store.read(info.id)).toBeUndefined();
        expect(await store.ids()).not.toContain(info.id);
      } finally {
        await close();
      }
    });

    it("takes back a discarded PATCH whole, keeping what earlier ones held", async () => {
      const { store, heldBytes, close } = await open();
      try {
        const bytes = randomBytes(3000);
        const info = declaration(bytes.length);
        await store.create(info);
        let partial = (await store.read(info.id)) as Partial;
        await append(store, partial, 0, bytes.subarray(0, 1000));
        partial = (await store.read(info.id)) as Partial;
        const writer = await store.openWriter(partial, 1000, held);
        await writer.write(bytes.subarray(1000, 2500));
        await writer.discard();
        expect(await writer.commit()).toBe(1000);
        await writer.close();
        expect((await store.read(info.id))?.offset).toBe(1000);
        expect(await heldBytes(info.id)).toBe(1000);
      } finally {
        await close();
      }
    });

    it("drops an expired partial's bytes and keeps its declaration", async () => {
      const { store, heldBytes, close } = await open();
      try {
        const info = declaration(100);
        await store.create(info);
        const partial = (await store.read(info.id)) as Partial;
        await append(store, partial, 0, randomBytes(40));
        await store.dropBytes(partial);
        expect(await store.read(info.id)).toMatchObject({ expired: true });
        expect(await heldBytes(info.id)).toBe(0);
        expect(await store.lastChanged(info.id)).toBeGreaterThan(Date.now() - 60_000);
      } finally {
        await close();
      }
    });

    it("never counts an old writer's bytes once the partial was removed and created again", async () => {
      const { store, close } = await open();
      try {
        const info = declaration(1000);
        await store.create(info);
        const old = await store.openWriter((await store.read(info.id)) as Partial, 0, held);
        // Terminated (or expired and started over) while that request still had bytes to send.
        await store.remove(info.id);
        const again = { ...info, createdAt: Date.now(), incarnation: "a9a1" };
        expect(await store.create(again)).toBe(true);
        await old.write(randomBytes(300));
        await old.commit().catch(() => undefined);
        await old.close();
        expect((await store.read(info.id))?.offset).toBe(0);
        const fresh = (await store.read(info.id)) as Partial;
        const bytes = randomBytes(1000);
        expect(await append(store, fresh, 0, bytes)).toBe(1000);
        expect((await archiveOf(store, (await store.read(info.id)) as Partial)).equals(bytes)).toBe(
          true,
        );
      } finally {
        await close();
      }
    });

    it("keeps an accepted record a partial_ttl from its acceptance, its bytes a grace shorter", async () => {
      const { store, heldBytes, ttlMs, close } = await open();
      try {
        const bytes = randomBytes(2000);
        // Created long ago, its last bytes arriving just now.
        const info = { ...declaration(bytes.length), createdAt: Date.now() - 3 * ttlMs };
        await store.create(info);
        await append(store, (await store.read(info.id)) as Partial, 0, bytes);
        const accepted = { run_id: "run-2" } as never;
        await store.markAccepted((await store.read(info.id)) as Partial, accepted);
        await expirePartials(store, ttlMs);
        expect(await store.read(info.id)).toMatchObject({ accepted });
        expect(await heldBytes(info.id)).toBe(bytes.length);
        await expirePartials(store, ttlMs, Date.now() + ttlMs - 2000);
        expect(await store.read(info.id)).toMatchObject({ accepted });
        expect(await heldBytes(info.id)).toBe(0);
        await expirePartials(store, ttlMs, Date.now() + ttlMs + 2000);
        expect(await store.read(info.id)).toBeUndefined();
      } finally {
        await close();
      }
    });

    it("knows no partial for an id no partial can have", async () => {
      const { store, close } = await open();
      try {
        expect(await store.read("../../etc")).toBeUndefined();
        expect(await store.read("short")).toBeUndefined();
      } finally {
        await close();
      }
    });
  });
}
