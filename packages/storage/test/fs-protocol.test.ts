import { describe, expect, it } from "vitest";
import { frameBackend } from "../src/adapter/backend-frame.js";
import type { StorageBackend } from "../src/backend.js";
import { isStorageError } from "../src/errors.js";
import { fsOperations } from "../src/fs-protocol/operations.js";
import { FsStore } from "../src/fs-protocol/store.js";
import { isTempFileName, swapLockName } from "../src/names.js";
import { describeBackendContract, expectStorageError } from "../src/testing/index.js";
import { MemoryFsDriver, type MemoryFsDriverOptions } from "../src/testing/memory-fs-driver.js";

/** A backend of the protocol over an in-memory driver, and the driver to look at its tree. */
function open(options: MemoryFsDriverOptions = {}): {
  backend: StorageBackend;
  driver: MemoryFsDriver;
} {
  const driver = new MemoryFsDriver(options);
  const backend = frameBackend(
    {
      name: driver.name,
      location: `${driver.name}:test`,
      mapError: (error, operation, path) => driver.toStorageError(error, operation, path),
    },
    fsOperations(new FsStore(driver)),
  );
  return { backend, driver };
}

describeBackendContract(
  "fs-protocol over the in-memory driver",
  () => ({ backend: open().backend }),
  { links: "full" },
);

// The SFTP shape: no hard links (creates move the temp file with a rename that refuses an
// existing target), no directory fsync, requests carried out in order, remembered directories,
// coarse mtimes, and a clock that is not ours.
describeBackendContract(
  "fs-protocol over the in-memory driver (SFTP capabilities)",
  () => ({
    backend: open({
      seed: 7,
      capabilities: {
        hardLink: false,
        directorySync: false,
        fileSync: false,
        orderedRequests: true,
        rememberDirectories: true,
        coarseMtime: true,
        localClock: false,
      },
    }).backend,
  }),
  // Without hard links a store offers no links at all.
);

describe("fs-protocol", () => {
  const racers = 24;

  for (const seed of [1, 2, 3, 4, 5]) {
    it(`lets exactly one of ${racers} concurrent compare-and-swaps of one file win (seed ${seed})`, async () => {
      const { backend, driver } = open({ seed });
      const { version } = await backend.writeFile("site/.distributor.json", "start");
      const outcomes = await Promise.allSettled(
        Array.from({ length: racers }, (_, index) =>
          backend.writeFile("site/.distributor.json", `swap ${index}`, { ifMatch: version }),
        ),
      );
      const winners = outcomes.flatMap((outcome, index) =>
        outcome.status === "fulfilled" ? [index] : [],
      );
      expect(winners).toHaveLength(1);
      for (const outcome of outcomes) {
        if (outcome.status === "rejected") {
          expect(isStorageError(outcome.reason, "conflict"), String(outcome.reason)).toBe(true);
        }
      }
      const stored = await backend.readVersioned("site/.distributor.json");
      expect(Buffer.from(stored.bytes).toString()).toBe(`swap ${winners[0]}`);
      const winner = outcomes[winners[0] as number] as PromiseFulfilledResult<{ version: string }>;
      expect(stored.version).toBe(winner.value.version);
      // No temp file, swap lock or breaker is left, and every handle was closed.
      expect(driver.entries()).toEqual(["directory site", "file site/.distributor.json"]);
      expect(driver.openHandles).toBe(0);
    });
  }

  it("lets exactly one of concurrent compare-and-swaps and fenced deletes of one version act", async () => {
    for (const seed of [11, 12, 13, 14]) {
      const { backend, driver } = open({ seed });
      const { version } = await backend.writeFile("b/out.txt", "v1");
      const outcomes = await Promise.allSettled([
        backend.writeFile("b/out.txt", "v2", { ifMatch: version }),
        backend.deletePaths("b", ["out.txt"], {
          ifMatch: new Map([["out.txt", version]]),
        }),
        backend.writeFile("b/out.txt", "v3", { ifMatch: version }),
      ]);
      expect(
        outcomes.filter((outcome) => outcome.status === "fulfilled"),
        `seed ${seed}`,
      ).toHaveLength(1);
      expect(
        driver.entries().filter((entry) => isTempFileName(entry.split("/").pop() ?? "")),
      ).toEqual([]);
    }
  });

  it("breaks a swap lock left by a dead writer once it has stayed unchanged", async () => {
    const { backend, driver } = open({ capabilities: { localClock: false, staleSwapLockMs: 50 } });
    const { version } = await backend.writeFile("s/.distributor.json", "v1");
    // A writer died holding the lock: an empty lock file beside the target.
    const dead = await driver.createExclusive(`s/${swapLockName(".distributor.json")}`);
    await driver.close(dead);
    await backend.writeFile("s/.distributor.json", "v2", { ifMatch: version });
    expect(Buffer.from(await backend.readFile("s/.distributor.json")).toString()).toBe("v2");
    expect(driver.entries()).toEqual(["directory s", "file s/.distributor.json"]);
  });

  it("refuses every overwrite before writing anything where atomic replacement is lacking", async () => {
    const { backend, driver } = open({ capabilities: { atomicReplace: false } });
    const { version } = await backend.writeFile("site/a.txt", "created");
    for (const [path, options] of [
      ["site/a.txt", { overwrite: true }],
      ["site/a.txt", { ifMatch: version }],
      ["site/new/b.txt", { overwrite: true }],
    ] as const) {
      const error = await expectStorageError(
        backend.writeFile(path, "again", options),
        "unsupported",
      );
      expect(error.message).toBe(
        `write file memory-fs:${path}: the in-memory store has no atomic rename, which atomic replacement needs`,
      );
    }
    expect(driver.entries()).toEqual(["directory site", "file site/a.txt"]);
  });

  it("creates without clobbering through a rename where hard links are lacking", async () => {
    const { backend, driver } = open({ seed: 3, capabilities: { hardLink: false } });
    const outcomes = await Promise.allSettled(
      Array.from({ length: 8 }, (_, index) => backend.writeFile("race/out.txt", `by ${index}`)),
    );
    const winners = outcomes.flatMap((outcome, index) =>
      outcome.status === "fulfilled" ? [index] : [],
    );
    expect(winners).toHaveLength(1);
    for (const outcome of outcomes) {
      if (outcome.status === "rejected")
        expect(outcome.reason).toMatchObject({ kind: "already_exists" });
    }
    expect(Buffer.from(await backend.readFile("race/out.txt")).toString()).toBe(`by ${winners[0]}`);
    expect(driver.entries()).toEqual(["directory race", "file race/out.txt"]);
  });

  it("refuses a symlink anywhere on the path, and leaves no directory a failed write made", async () => {
    const { backend, driver } = open();
    await backend.writeFile("real/a.txt", "a");
    driver.addSymlink("real/link");
    await expectStorageError(backend.writeFile("real/link/deeper/b.txt", "b"), "unsupported");
    await expectStorageError(backend.stat("real/link"), "unsupported");
    // A source that fails after the directories were made: they go with the temp file.
    async function* failing(): AsyncGenerator<Uint8Array> {
      yield Buffer.from("partial");
      throw new Error("source broke");
    }
    await expect(backend.writeFile("fresh/deep/c.txt", failing())).rejects.toThrow("source broke");
    expect(driver.entries()).toEqual(["directory real", "file real/a.txt", "symlink real/link"]);
  });
});
