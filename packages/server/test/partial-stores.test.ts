import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { directoryPartialStore } from "../src/resumable/directory-store.js";
import { type Partial, PartialMovedError } from "../src/resumable/partial-store.js";
import { declaration, partialStoreContract } from "../src/testing/index.js";

// The staging directory as a partial store: the contract, and the stale lock's two holders.

const TTL = 60_000;

async function directoryFixture() {
  const root = await mkdtemp(join(tmpdir(), "distributor-partials-"));
  return {
    root,
    store: directoryPartialStore(root, TTL),
    heldBytes: async (id: string) =>
      (await stat(join(root, `partial-${id}`, "data")).catch(() => undefined))?.size ?? 0,
    close: () => rm(root, { recursive: true, force: true }),
  };
}

partialStoreContract("staging directory", directoryFixture);

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
      const second = await store.openWriter(partial, 50, first);
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
});
