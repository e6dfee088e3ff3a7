import { ownerScope, parseDocument, serializeDocument } from "@distributor/state";
import { LEASE_FILE_NAME, type StorageBackend } from "@distributor/storage";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LeaseHeldError, parseLease } from "../../src/protocol/lease-file.js";
import { withStateTransaction } from "../../src/protocol/transaction.js";
import {
  BACKEND_KINDS,
  exists,
  manifestFor,
  newBackend,
  readText,
  removeTempBackends,
  singleOwnerState,
  useBackendKind,
} from "../../src/testing/fixtures.js";

const OWNER = ownerScope("reports", "archive");
const LEASE = `site/${LEASE_FILE_NAME}`;
const STATE = "site/.distributor.json";
const LATER = new Date("2026-06-05T10:00:00Z");

const FILES = { "a.txt": "a\n", "docs/b.txt": "b\n" };
const RECORDED = singleOwnerState(manifestFor(FILES));

/** A bundle path `site` whose state records a.txt and docs/b.txt, both present. */
async function recordedSite(): Promise<StorageBackend> {
  const backend = newBackend({ files: { "site/a.txt": "a\n", "site/docs/b.txt": "b\n" } });
  await backend.writeFile(STATE, serializeDocument(RECORDED), { overwrite: true });
  return backend;
}

/** The state without its records of `paths`, as a change that deletes them commits it. */
function without(...paths: string[]) {
  return {
    ...RECORDED,
    outputs: RECORDED.outputs.filter((output) => !paths.includes(output.path)),
    updatedAt: LATER,
  };
}

async function stateOf(backend: StorageBackend) {
  return parseDocument(await readText(backend, STATE));
}

async function leaseLeft(backend: StorageBackend) {
  const lease = parseLease(await readText(backend, LEASE));
  if (lease === undefined) throw new Error("the lease left is not readable");
  return lease;
}

/** A backend whose deletes of `failing` fail (the store refuses them). */
function failingDeletes(backend: StorageBackend, failing: string): StorageBackend {
  return new Proxy(backend, {
    get(target, property) {
      if (property === "deletePaths") {
        return async (prefix: string, paths: readonly string[], options: never) => {
          if (paths.includes(failing)) throw new Error(`deleting ${failing}: disk went read-only`);
          return target.deletePaths(prefix, paths, options);
        };
      }
      const value = Reflect.get(target, property, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

const options = { lease: { renew: false } };

describe.each(BACKEND_KINDS)("%s: a state transaction", (kind) => {
  beforeAll(() => useBackendKind(kind));
  afterAll(removeTempBackends);

  it("reads the state under the lease, commits, deletes after the commit and releases", async () => {
    const backend = await recordedSite();
    const deleted: string[] = [];

    const kept = await withStateTransaction(backend, "site", OWNER, options, async (tx) => {
      expect(tx.dryRun).toBe(false);
      expect(tx.read.status.state).toEqual(RECORDED);
      expect(tx.read.version).toBeDefined();
      // The lease is held while the body runs.
      expect((await leaseLeft(backend)).owner).toEqual({
        pipeline_id: "reports",
        destination_id: "archive",
      });
      await tx.journal({ deletes: ["docs/b.txt"], directories: ["docs"] });
      expect((await leaseLeft(backend)).journal).toEqual(["docs/b.txt"]);
      await tx.commit(without("docs/b.txt"));
      // Committed before anything is deleted.
      expect(await exists(backend, "site/docs/b.txt")).toBe(true);
      return tx.deleteAfter({ onDeleted: (path) => deleted.push(path) });
    });

    expect(kept).toEqual([]);
    expect(deleted).toEqual(["docs/b.txt"]);
    expect(await stateOf(backend)).toEqual(without("docs/b.txt"));
    expect(await exists(backend, "site/docs/b.txt")).toBe(false);
    expect(await exists(backend, "site/a.txt")).toBe(true);
    expect(await exists(backend, LEASE)).toBe(false);
  });

  it("creates a state where none was, only while none is", async () => {
    const backend = newBackend({ files: { "site/a.txt": "a\n" } });
    await withStateTransaction(backend, "site", OWNER, options, async (tx) => {
      expect(tx.read.status.state).toBeUndefined();
      expect(tx.read.version).toBeUndefined();
      await tx.commit(RECORDED);
    });
    expect(await stateOf(backend)).toEqual(RECORDED);

    // A second creation from the same read is refused: a state is there now.
    const refused = withStateTransaction(backend, "other", OWNER, options, async (tx) => {
      await backend.writeFile("other/.distributor.json", serializeDocument(RECORDED));
      await tx.commit(without("a.txt"));
    });
    await expect(refused).rejects.toMatchObject({ code: "state_changed" });
    expect(parseDocument(await readText(backend, "other/.distributor.json"))).toEqual(RECORDED);
  });

  it("refuses a commit when the state changed since it was read, and deletes nothing", async () => {
    const backend = await recordedSite();
    const theirs = { ...RECORDED, updatedAt: LATER };

    const failure = await withStateTransaction(backend, "site", OWNER, options, async (tx) => {
      await tx.journal({ deletes: ["a.txt"] });
      // Another writer (a stalled run's late write) changes the state behind the lease.
      await backend.writeFile(STATE, serializeDocument(theirs), { overwrite: true });
      await tx.commit(without("a.txt"));
    }).catch((error: unknown) => error);

    expect(failure).toMatchObject({ name: "StateChangedError", code: "state_changed" });
    expect(await stateOf(backend)).toEqual(theirs);
    expect(await exists(backend, "site/a.txt")).toBe(true);
    // The journal stays with the abandoned lease: the next run decides from it.
    const lease = await leaseLeft(backend);
    expect(lease.journal).toEqual(["a.txt"]);
    expect(Date.parse(lease.expires_at)).toBeLessThanOrEqual(Date.now());
  });

  it("abandons the lease with what is still to delete when the body fails after its journal", async () => {
    const backend = await recordedSite();

    const failure = withStateTransaction(backend, "site", OWNER, options, async (tx) => {
      await tx.journal({ deletes: ["a.txt", "docs/b.txt"], directories: ["", "docs"] });
      await tx.commit(without("a.txt", "docs/b.txt"));
      throw new Error("interrupted after the commit");
    });

    await expect(failure).rejects.toThrow("interrupted after the commit");
    const lease = await leaseLeft(backend);
    expect(lease.journal).toEqual(["a.txt", "docs/b.txt"]);
    expect(lease.directories).toEqual(["", "docs"]);
    expect(Date.parse(lease.expires_at)).toBeLessThanOrEqual(Date.now());

    // The next transaction recovers the abandoned journal before its body reads the state.
    await withStateTransaction(backend, "site", OWNER, options, async (tx) => {
      // Recovery rewrites the state (a new `updated_at`) to fence a late commit; the records stay.
      expect(tx.read.status.state?.outputs).toEqual([]);
      expect(await exists(backend, "site/a.txt")).toBe(false);
      expect(await exists(backend, "site/docs/b.txt")).toBe(false);
    });
    expect(await exists(backend, LEASE)).toBe(false);
  });

  it("keeps the failed delete and the ones after it journaled", async () => {
    const backend = await recordedSite();
    await backend.writeFile("site/c.txt", "c\n");
    const faulty = failingDeletes(backend, "a.txt");
    const deleted: string[] = [];

    const failure = await withStateTransaction(faulty, "site", OWNER, options, async (tx) => {
      await tx.journal({ deletes: ["docs/b.txt", "a.txt", "c.txt"] });
      await tx.commit(without("a.txt", "docs/b.txt"));
      await tx.deleteAfter({
        onDeleted: (path) => deleted.push(path),
        failureMessage: (path, error) => `could not prune ${path}: ${(error as Error).message}`,
      });
    }).catch((error: unknown) => error);

    expect(failure).toMatchObject({
      name: "PendingDeletesError",
      code: "delete_failed",
      message: "could not prune a.txt: deleting a.txt: disk went read-only",
      pending: ["a.txt", "c.txt"],
    });
    expect(deleted).toEqual(["docs/b.txt"]);
    expect(await stateOf(backend)).toEqual(without("a.txt", "docs/b.txt"));
    expect((await leaseLeft(backend)).journal).toEqual(["a.txt", "c.txt"]);
  });

  it("leaves a path rewritten since the journal when the lease is no longer provably held", async () => {
    const backend = await recordedSite();
    const kept = await withStateTransaction(backend, "site", OWNER, options, async (tx) => {
      await tx.journal({ deletes: ["a.txt"] });
      await tx.commit(without("a.txt"));
      await backend.writeFile("site/a.txt", "rewritten\n", { overwrite: true });
      // Another run takes the lease over: its confirmation now fails.
      await backend.writeFile(LEASE, "{}", { overwrite: true });
      return tx.deleteAfter();
    });
    expect(kept).toEqual(["a.txt"]);
    expect(await readText(backend, "site/a.txt")).toBe("rewritten\n");
  });

  it("releases the lease when the body fails before journaling anything", async () => {
    const backend = await recordedSite();
    const failure = withStateTransaction(backend, "site", OWNER, options, async () => {
      throw new Error("refused while planning");
    });
    await expect(failure).rejects.toThrow("refused while planning");
    expect(await exists(backend, LEASE)).toBe(false);
    expect(await stateOf(backend)).toEqual(RECORDED);
  });

  it("refuses a state too large before its journal, and releases the lease", async () => {
    const backend = await recordedSite();
    const limits = { stateBytes: { value: 4096 }, entries: { value: 1000 } };
    const failure = withStateTransaction(backend, "site", OWNER, { ...options, limits }, (tx) => {
      const many = manifestFor(
        Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`f${i}.txt`, `${i}\n`])),
      );
      tx.prepare(singleOwnerState(many));
      return tx.journal({ deletes: ["a.txt"] });
    });
    await expect(failure).rejects.toMatchObject({ code: "state_too_large" });
    expect(await exists(backend, LEASE)).toBe(false);
    expect(await stateOf(backend)).toEqual(RECORDED);
  });

  it("removes the state and, with the lease, the directories left empty", async () => {
    const backend = newBackend({ files: { "site/day/a.txt": "a\n" } });
    await backend.writeFile("site/day/.distributor.json", serializeDocument(RECORDED));
    await withStateTransaction(backend, "site/day", OWNER, options, async (tx) => {
      await tx.journal({ deletes: ["a.txt"] });
      await tx.commit(without("a.txt", "docs/b.txt"));
      await tx.deleteAfter();
      await tx.removeState();
    });
    expect(await exists(backend, "site/day/.distributor.json")).toBe(false);
    expect(await exists(backend, `site/day/${LEASE_FILE_NAME}`)).toBe(false);
    expect(await backend.hasAny("site/day")).toBe(false);
  });

  it("deletes nothing before a commit", async () => {
    const backend = await recordedSite();
    const failure = withStateTransaction(backend, "site", OWNER, options, async (tx) => {
      await tx.journal({ deletes: ["a.txt"] });
      await tx.deleteAfter();
    });
    await expect(failure).rejects.toThrow(/come after its commit/);
    expect(await exists(backend, "site/a.txt")).toBe(true);
  });

  it("refuses to start while another run holds the lease", async () => {
    const backend = await recordedSite();
    await withStateTransaction(backend, "site", OWNER, options, async () => {
      const second = withStateTransaction(backend, "site", OWNER, options, async () => "ran");
      await expect(second).rejects.toBeInstanceOf(LeaseHeldError);
    });
  });

  it("reads without a lease in a dry run, and changes nothing", async () => {
    const backend = await recordedSite();
    const ran = await withStateTransaction(
      backend,
      "site",
      OWNER,
      { ...options, dryRun: true },
      async (tx) => {
        expect(tx.dryRun).toBe(true);
        expect(tx.read.status.state).toEqual(RECORDED);
        expect(await exists(backend, LEASE)).toBe(false);
        await expect(tx.journal({ deletes: ["a.txt"] })).rejects.toThrow(/holds no lease/);
        await expect(tx.commit(without("a.txt"))).rejects.toThrow(/holds no lease/);
        await expect(tx.removeState()).rejects.toThrow(/holds no lease/);
        return "read";
      },
    );
    expect(ran).toBe("read");
    expect(await stateOf(backend)).toEqual(RECORDED);
    expect(await exists(backend, "site/a.txt")).toBe(true);
    expect(await exists(backend, LEASE)).toBe(false);
  });
});
