import { readdir, readFile, rename, rm, stat, utimes, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { isTempFileFor, type StorageBackend } from "@distributor/storage";
import { FsStore, swapBreakerName, swapLockName, withSwapLock } from "@distributor/storage/adapter";
import { expectStorageError } from "@distributor/storage/testing";
import { afterEach, describe, expect, it } from "vitest";
import { openSession } from "../src/connect.js";
import { SftpDriver } from "../src/driver.js";
import { createSshBackend } from "../src/index.js";
import type { Session } from "../src/session.js";
import { backendOptions, freshRoot, sshd } from "./fixture.js";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.skipIf(sshd === null)("swap lock", () => {
  const sessions: Session[] = [];
  const opened: StorageBackend[] = [];
  afterEach(async () => {
    for (const session of sessions.splice(0)) await session.close();
    for (const backend of opened.splice(0)) await backend.close();
  });

  const open = async (root: string) => {
    const backend = await createSshBackend(backendOptions(root));
    opened.push(backend);
    return backend;
  };
  /** A store on a connection of its own: waiters on separate connections run side by side. */
  const remoteOn = async (root: string) => {
    const session = await openSession(backendOptions(root));
    sessions.push(session);
    return new FsStore(new SftpDriver(session, root));
  };

  it("names its lock and breaker files as reserved temp files of the target", () => {
    // So the commit protocol's recovery removes what a crashed holder or breaker left behind.
    expect(isTempFileFor(swapLockName("state.json"), "state.json")).toBe(true);
    expect(isTempFileFor(swapBreakerName("state.json"), "state.json")).toBe(true);
    expect(swapBreakerName("state.json")).not.toBe(swapLockName("state.json"));
  });

  it("lets exactly one of several waiters break a stale lock", async () => {
    const root = await freshRoot();
    // Left by a writer that died holding it.
    await writeFile(join(root, swapLockName("state.json")), "dead holder");
    const remotes = await Promise.all(Array.from({ length: 6 }, () => remoteOn(root)));
    let inside = 0;
    let most = 0;
    let entered = 0;
    // Far longer than a holder keeps the lock, so only the dead holder's lock is ever stale.
    const staleMs = 1_000;
    // Each holds the lock for a while: a waiter that removed a fresh lock would join it inside.
    await Promise.all(
      remotes.map((remote) =>
        withSwapLock(
          remote,
          "",
          "state.json",
          async () => {
            entered++;
            most = Math.max(most, ++inside);
            await sleep(100);
            inside--;
          },
          { staleMs },
        ),
      ),
    );
    expect(entered).toBe(remotes.length);
    expect(most).toBe(1);
    // Neither the lock nor a breaker file stays behind.
    expect(await readdir(root)).toEqual([]);
  });

  it("never breaks a fresh lock that looks like the stale one it replaced", async () => {
    const root = await freshRoot();
    const lock = join(root, swapLockName("state.json"));
    // SFTP shows size and whole-second mtime only: give the fresh lock both of the stale one's.
    const past = new Date("2026-01-01T00:00:00Z");
    await writeFile(lock, "a".repeat(32));
    await utimes(lock, past, past);
    const remote = await remoteOn(root);
    const staleMs = 1_000;
    const started = Date.now();
    let enteredAt: number | undefined;
    const waiting = withSwapLock(
      remote,
      "",
      "state.json",
      async () => {
        enteredAt = Date.now() - started;
      },
      { staleMs },
    );
    await sleep(300);
    // The stale holder's lock goes and another holder's takes its place, alike but for the token.
    await writeFile(`${lock}.next`, "b".repeat(32));
    await utimes(`${lock}.next`, past, past);
    await rename(`${lock}.next`, lock);
    // The waiter judges "its" lock stale at about 1 s; the holder keeps it until 1.5 s.
    await sleep(1_500 - (Date.now() - started));
    expect(enteredAt).toBeUndefined();
    await rm(lock);
    await waiting;
    expect(enteredAt).toBeGreaterThanOrEqual(1_500);
    expect(await readdir(root)).toEqual([]);
  });

  it("breaks a breaker file left by a dead breaker, then the stale lock", async () => {
    const root = await freshRoot();
    await writeFile(join(root, swapLockName("state.json")), "dead holder");
    await writeFile(join(root, swapBreakerName("state.json")), "dead breaker");
    const remote = await remoteOn(root);
    let ran = false;
    await withSwapLock(
      remote,
      "",
      "state.json",
      async () => {
        ran = true;
      },
      { staleMs: 200 },
    );
    expect(ran).toBe(true);
    expect(await readdir(root)).toEqual([]);
  });

  it("lets one of several compare-and-swaps win behind a lock left by a dead writer", async () => {
    const root = await freshRoot();
    const writer = await open(root);
    const { version } = await writer.writeFile("site/.distributor.json", "v1");
    await writeFile(join(root, "site", swapLockName(".distributor.json")), "dead holder");
    const backends = await Promise.all(Array.from({ length: 4 }, () => open(root)));
    const attempts = await Promise.allSettled(
      backends.map((backend, index) =>
        backend.writeFile("site/.distributor.json", `v2 by ${index}`, { ifMatch: version }),
      ),
    );
    const winners = attempts.flatMap((attempt, index) =>
      attempt.status === "fulfilled" ? [index] : [],
    );
    expect(winners).toHaveLength(1);
    for (const attempt of attempts) {
      if (attempt.status === "rejected") expect(attempt.reason).toMatchObject({ kind: "conflict" });
    }
    expect(await readFile(join(root, "site", ".distributor.json"), "utf8")).toBe(
      `v2 by ${winners[0]}`,
    );
    expect(await readdir(join(root, "site"))).toEqual([".distributor.json"]);
  }, 30_000);

  describe("fenced deletes", () => {
    it("wait for the target's swap lock and check the version under it", async () => {
      const root = await freshRoot();
      const backend = await open(root);
      const { version } = await backend.writeFile("bundle/out.txt", "one");
      // A compare-and-swap of the target holds its lock.
      const lock = join(root, "bundle", swapLockName("out.txt"));
      await writeFile(lock, "held");
      let settled = false;
      const deleting = backend
        .deletePaths("bundle", ["out.txt"], { ifMatch: new Map([["out.txt", version]]) })
        .finally(() => {
          settled = true;
        });
      await sleep(400);
      expect(settled).toBe(false);
      expect(await readFile(join(root, "bundle", "out.txt"), "utf8")).toBe("one");
      await rm(lock);
      await deleting;
      await expect(stat(join(root, "bundle"))).resolves.toBeDefined();
      expect(await readdir(join(root, "bundle"))).toEqual([]);
    });

    it("of a compare-and-swap and a fenced delete of one version, exactly one wins", async () => {
      const root = await freshRoot();
      const writer = await open(root);
      const deleter = await open(root);
      for (let round = 0; round < 16; round++) {
        const { version } = await writer.writeFile("b/out.txt", `round ${round}`, {
          overwrite: true,
        });
        // The delete starts a little later each round: from side by side to after the swap.
        const [written, deleted] = await Promise.allSettled([
          writer.writeFile("b/out.txt", `replaced in ${round}`, { ifMatch: version }),
          sleep(round * 3).then(() =>
            deleter.deletePaths("b", ["out.txt"], {
              ifMatch: new Map([["out.txt", version]]),
            }),
          ),
        ]);
        const won = [written, deleted].filter((outcome) => outcome.status === "fulfilled");
        expect(won, `round ${round}`).toHaveLength(1);
        const lost = [written, deleted].find((outcome) => outcome.status === "rejected");
        expect(lost).toMatchObject({ reason: { kind: "conflict" } });
        if (written.status === "fulfilled") {
          expect(await readFile(join(root, "b", "out.txt"), "utf8")).toBe(`replaced in ${round}`);
        } else {
          await expect(stat(join(root, "b", "out.txt"))).rejects.toMatchObject({ code: "ENOENT" });
        }
        expect((await readdir(join(root, "b"))).filter((name) => name !== "out.txt")).toEqual([]);
      }
    });

    it("fail with not_found for a fenced target that is gone, unless ignoreMissing", async () => {
      const root = await freshRoot();
      const backend = await open(root);
      const { version } = await backend.writeFile("b/out.txt", "x");
      await backend.writeFile("b/other.txt", "y");
      await rm(join(root, "b", "out.txt"));
      await expectStorageError(
        backend.deletePaths("b", ["out.txt"], {
          ifMatch: new Map([["out.txt", version]]),
        }),
        "not_found",
      );
      await backend.deletePaths("b", ["out.txt", "other.txt"], {
        ignoreMissing: true,
        pruneEmptyDirs: true,
        ifMatch: new Map([["out.txt", version]]),
      });
      expect(await readdir(root)).toEqual([]);
    });
  });
});
