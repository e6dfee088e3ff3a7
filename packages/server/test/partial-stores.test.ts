import { mkdtemp, readdir, readFile, rm, stat, truncate, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLocalBackend } from "@distributor/storage";
import { describe, expect, it } from "vitest";
import { directoryPartialStore } from "../src/resumable/directory-store.js";
import { expirePartials } from "../src/resumable/expiry.js";
import {
  type Partial,
  PartialGoneError,
  PartialMovedError,
  type PartialStore,
} from "../src/resumable/partial-store.js";
import {
  coverage,
  declaration,
  parseChunk,
  partialStoreContract,
  s3PartialStore,
} from "../src/testing/index.js";

// The staging directory as a partial store: the contract, and the stale lock's two holders. The
// S3 store runs the contract here over a local backend (the layout and its faults; Ceph RGW runs
// it in the end-to-end package).

const TTL = 60_000;

async function directoryFixture() {
  const root = await mkdtemp(join(tmpdir(), "distributor-partials-"));
  return {
    root,
    ttlMs: TTL,
    store: directoryPartialStore(root, TTL),
    heldBytes: async (id: string) =>
      (await stat(join(root, `partial-${id}`, "data")).catch(() => undefined))?.size ?? 0,
    close: () => rm(root, { recursive: true, force: true }),
  };
}

async function s3LayoutFixture() {
  const root = await mkdtemp(join(tmpdir(), "distributor-s3-partials-"));
  const backend = createLocalBackend({ root });
  const store = s3PartialStore(backend, TTL);
  return {
    root,
    ttlMs: TTL,
    store,
    async heldBytes(id: string) {
      const names = await readdir(join(root, `partial-${id}`)).catch(() => [] as string[]);
      const info = await readFile(join(root, `partial-${id}`, "info.json"), "utf8").catch(
        () => "{}",
      );
      const incarnation = (JSON.parse(info) as { incarnation?: string }).incarnation;
      const chunks = names.flatMap((name) => parseChunk(name) ?? []);
      return coverage(chunks.filter((chunk) => chunk.incarnation === incarnation)).covered;
    },
    close: async () => {
      await backend.close();
      await rm(root, { recursive: true, force: true });
    },
  };
}

partialStoreContract("staging directory", directoryFixture);
partialStoreContract("S3 layout over a local backend", s3LayoutFixture);

const held = { refresh: async () => true, release: async () => undefined };

async function appendAll(store: PartialStore, id: string, bytes: Buffer) {
  const writer = await store.openWriter((await store.read(id)) as Partial, 0, held);
  await writer.write(bytes);
  await writer.commit();
  await writer.close();
}

describe("a partial in the staging directory with two holders of its lock", () => {
  it("refuses a write from an offset the file no longer holds, and never truncates bytes of the holder that took over", async () => {
    const { root, store, close } = await directoryFixture();
    try {
      const info = declaration(300);
      await store.create(info);
      const partial = (await store.read(info.id)) as Partial;
      const lockPath = join(root, `partial-${info.id}`, "lock");
      // The first holder stalls past LOCK_STALE_MS with its lock taken over...
      const first = await store.lock(partial, "host 1 first");
      if (typeof first === "string") throw new Error(`lock: ${first}`);
      const stalled = await store.openWriter(partial, 0, first);
      await stalled.write(Buffer.alloc(50, 1));
      await writeFile(lockPath, "host 2 second");
      // ...and the second, having read 0 bytes before the first flushed, is refused at open: its
      // offset is checked against the file, not against its earlier read.
      await expect(store.openWriter(partial, 0, first)).rejects.toBeInstanceOf(PartialMovedError);
      const second = await store.openWriter(partial, 50, held);
      await second.write(Buffer.alloc(100, 2));
      expect(await second.commit()).toBe(150);
      // The stalled holder's refusal (say, a checksum that failed) leaves the file alone.
      await stalled.discard();
      await stalled.close();
      await second.close();
      const bytes = await readFile(join(root, `partial-${info.id}`, "data"));
      expect(bytes.length).toBe(150);
      expect(bytes.subarray(50).equals(Buffer.alloc(100, 2))).toBe(true);
      expect((await store.read(info.id))?.offset).toBe(150);
    } finally {
      await close();
    }
  });

  it("never reports an offset to a holder whose lock was taken over", async () => {
    const { root, store, close } = await directoryFixture();
    try {
      const info = declaration(300);
      await store.create(info);
      const partial = (await store.read(info.id)) as Partial;
      const lock = await store.lock(partial, "host 1 first");
      if (typeof lock === "string") throw new Error(`lock: ${lock}`);
      const stalled = await store.openWriter(partial, 0, lock);
      await stalled.write(Buffer.alloc(300, 1));
      await writeFile(join(root, `partial-${info.id}`, "lock"), "host 2 second");
      await expect(stalled.commit()).rejects.toThrow(/lock/);
      await stalled.close();
    } finally {
      await close();
    }
  });
});

describe("a partial in the S3 layout", () => {
  it("refuses to read back a chunk object shorter than its name says, keeping the partial", async () => {
    const { root, store, close } = await s3LayoutFixture();
    try {
      const bytes = Buffer.alloc(1000, 7);
      const info = declaration(bytes.length);
      await store.create(info);
      await appendAll(store, info.id, bytes);
      const directory = join(root, `partial-${info.id}`);
      const chunk = (await readdir(directory)).find((name) => name.startsWith("chunk-"));
      await truncate(join(directory, chunk as string), 600);
      const partial = (await store.read(info.id)) as Partial;
      const read = async () => {
        for await (const _ of store.archive(partial)) void _;
      };
      await expect(read()).rejects.toThrow(/600|1000/);
      expect((await store.read(info.id))?.offset).toBe(1000);
    } finally {
      await close();
    }
  });
});

describe("a partial in the S3 layout while it is written", () => {
  it("is kept alive by a PATCH that receives slower than a chunk fills", async () => {
    const { store, close } = await s3LayoutFixture();
    try {
      // Created so long ago that it expires in five seconds, with nothing stored yet.
      const info = { ...declaration(1000), createdAt: Date.now() - TTL + 5000 };
      await store.create(info);
      const partial = (await store.read(info.id)) as Partial;
      expect(partial.expiresAt).toBeLessThan(Date.now() + 6000);
      const lock = await store.lock(partial, "host 1 slow");
      if (typeof lock === "string") throw new Error(`lock: ${lock}`);
      expect(await lock.refresh()).toBe(true);
      expect((await store.read(info.id))?.expiresAt).toBeGreaterThan(Date.now() + TTL - 5000);
    } finally {
      await close();
    }
  });

  it("fails the commit of a creation whose declaration was overwritten by another's", async () => {
    const { root, store, close } = await s3LayoutFixture();
    try {
      const first = declaration(1000);
      expect(await store.create(first)).toBe(true);
      const writer = await store.openWriter((await store.read(first.id)) as Partial, 0, held);
      // Another instance found none either and wrote its own declaration after this one.
      const second = { ...first, length: 2000, incarnation: "b0b0b0" };
      await writeFile(join(root, `partial-${first.id}`, "info.json"), JSON.stringify(second));
      await writer.write(Buffer.alloc(500, 1));
      await expect(writer.commit()).rejects.toBeInstanceOf(PartialGoneError);
      await writer.close();
      expect(await store.read(first.id)).toMatchObject({ offset: 0, info: { length: 2000 } });
    } finally {
      await close();
    }
  });
});

describe("the partial sweeper", () => {
  it("expires every other partial when one of them cannot be read", async () => {
    const { store, heldBytes, close } = await directoryFixture();
    try {
      const broken = declaration(100, "aaaaaaaaaaaaaaaaaaaaaaaa");
      const stale = { ...declaration(100, "zzzzzzzzzzzzzzzzzzzzzzzz"), createdAt: 0 };
      for (const info of [broken, stale]) await store.create(info);
      await appendAll(store, stale.id, Buffer.alloc(40));
      const failing: PartialStore = {
        ...store,
        ids: async () => [broken.id, stale.id],
        read: async (id) => (id === broken.id ? undefined : store.read(id)),
        lastChanged: async (id) => {
          if (id === broken.id) throw new Error("the listing failed");
          return store.lastChanged(id);
        },
      };
      await expirePartials(failing, TTL, Date.now() + 2 * TTL).catch(() => undefined);
      expect(await heldBytes(stale.id)).toBe(0);
      expect(await store.read(stale.id)).toMatchObject({ expired: true });
    } finally {
      await close();
    }
  });
});
