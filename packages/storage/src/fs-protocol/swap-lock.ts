import { randomBytes } from "node:crypto";
import { throwIfAborted } from "../adapter/abort.js";
import { swapBreakerName, swapLockName } from "../names.js";
import type { FsDriver, FsStats } from "./driver.js";
import { beside, type FsStore } from "./store.js";

/** How long a waiter sleeps between two looks at a held lock. */
const RETRY_MS = 3;

/** Bytes of the token each holder writes into its lock file. */
const TOKEN_BYTES = 16;

/**
 * Runs `body` holding the swap lock of the target `name` in the logical directory `parent`: a
 * file created exclusively beside the target, named after it with the reserved temp pattern (so
 * recovery recognises leftovers as debris), holding a random token of its holder. A
 * compare-and-swap and a fenced delete check the version and act under it, so of several of them
 * on one version exactly one acts. A lock that stays the same file for the driver's
 * `staleSwapLockMs` is broken, by exactly one waiter (see `breakStaleLock`). `body` may send the
 * release itself (`release`) right behind its last request, where the driver keeps requests in
 * order, so that the lock goes in the same round trip as the change it guarded.
 */
export async function withSwapLock<T, Handle>(
  store: FsStore<Handle>,
  parent: string,
  name: string,
  body: (release: () => Promise<void>) => Promise<T>,
  options: { signal?: AbortSignal | undefined; staleMs?: number } = {},
): Promise<T> {
  const { signal } = options;
  const staleMs = options.staleMs ?? store.driver.capabilities.staleSwapLockMs;
  // The lock's own handles stay on one channel.
  const io = store.driver.scope(signal, true);
  const lock = beside(parent, swapLockName(name));
  const breaker = beside(parent, swapBreakerName(name));
  const token = randomBytes(TOKEN_BYTES).toString("hex");
  const localClock = store.driver.capabilities.localClock;
  const breakerWatch = new Unchanged(staleMs * 2, localClock);
  // The lock as first seen (its token read once per new identity), and since when.
  let sighting: { lock: LockIdentity; since: number } | undefined;
  let vanished = 0;
  for (;;) {
    throwIfAborted(signal);
    let refusal: unknown;
    try {
      await createHolding(io, lock, token);
      break;
    } catch (error) {
      refusal = error;
    }
    const held = await io.lstat(lock);
    if (held === undefined) {
      // Released meanwhile; a failure that keeps coming without a lock is not contention.
      const failure = io.classify(refusal);
      if (failure === "not_found" || failure === "unsupported" || ++vanished > 100) throw refusal;
      continue;
    }
    if (sighting === undefined || sighting.lock.identity !== held.identity) {
      const seen = await readLock(io, lock);
      sighting =
        seen === undefined ? undefined : { lock: seen, since: firstSeen(seen.mtimeMs, localClock) };
      continue;
    }
    if (Date.now() - sighting.since > staleMs) {
      // While another waiter breaks it, the lock stays judged stale: this one tries again soon.
      const outcome = await breakStaleLock(io, lock, breaker, sighting.lock, breakerWatch);
      if (outcome !== "busy") {
        sighting = undefined;
        continue;
      }
    }
    await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
  }
  let released: Promise<void> | undefined;
  const release = () => {
    released ??= io.tidy((clean) => clean.unlink(lock));
    return released;
  };
  try {
    return await body(release);
  } finally {
    await release();
  }
}

/**
 * When a file was first seen unchanged: its mtime when that is on our clock (a lock left long
 * ago is stale at once), else now, so staleness never compares the store's clock with ours.
 */
function firstSeen(mtimeMs: number, localClock: boolean): number {
  const now = Date.now();
  return localClock ? Math.min(now, mtimeMs) : now;
}

/**
 * Creates `path` exclusively holding `token`. Where requests run in order the token and the
 * close go out together, right behind the create's answer; until the token lands the file is
 * empty, which `breakStaleLock` allows for.
 */
async function createHolding<Handle>(
  io: FsDriver<Handle>,
  path: string,
  token: string,
): Promise<void> {
  const handle = await io.createExclusive(path);
  const bytes = Buffer.from(token);
  try {
    await inOrder(io, [() => io.write(handle, bytes, 0), () => io.close(handle)]);
  } catch (error) {
    await io.tidy((clean) => clean.unlink(path));
    throw error;
  }
}

/**
 * Runs the steps one after another, or, where the driver carries requests out in the order
 * sent, all at once: one round trip. Every step is settled before a failure is reported.
 */
export async function inOrder(io: FsDriver<unknown>, steps: (() => Promise<unknown>)[]) {
  if (!io.capabilities.orderedRequests) {
    const results: unknown[] = [];
    let failure: { error: unknown } | undefined;
    for (const step of steps) {
      try {
        results.push(await step());
      } catch (error) {
        failure ??= { error };
      }
    }
    if (failure !== undefined) throw failure.error;
    return results;
  }
  const settled = await Promise.allSettled(steps.map((step) => step()));
  const failed = settled.find((outcome) => outcome.status === "rejected");
  if (failed !== undefined) throw (failed as PromiseRejectedResult).reason;
  return settled.map((outcome) => (outcome as PromiseFulfilledResult<unknown>).value);
}

/** What identifies one lock file: its holder's token and the driver's identity of the file. */
interface LockIdentity {
  token: string;
  identity: string;
  mtimeMs: number;
}

/** Reads the lock file at `path`, or undefined when it is gone. */
async function readLock<Handle>(
  io: FsDriver<Handle>,
  path: string,
): Promise<LockIdentity | undefined> {
  let handle: Handle;
  try {
    handle = await io.openRead(path);
  } catch (error) {
    if (io.classify(error) === "not_found") return undefined;
    throw error;
  }
  const buffer = Buffer.alloc(TOKEN_BYTES * 2);
  try {
    const [stats, length] = (await inOrder(io, [
      () => io.fstat(handle),
      () => io.read(handle, buffer, 0),
    ])) as [FsStats, number];
    return {
      token: buffer.toString("utf8", 0, length),
      identity: stats.identity,
      mtimeMs: stats.mtimeMs,
    };
  } finally {
    await io.tidy((clean) => clean.close(handle));
  }
}

/**
 * Removes `lock` if it is still the file judged stale (`judged`, read when first seen). Two
 * waiters that both judged one lock stale must not both remove "it": the second would remove the
 * fresh lock the first has taken since. So a breaker first creates `breaker` exclusively, then
 * reads the lock again under it and removes it only if it is still the very file it judged
 * stale: same token and identity (where a store shows no inode and whole-second mtimes, two locks
 * of one second and one size look alike; the holders' tokens tell them apart). A breaker file
 * left by a dead breaker is removed once it has stayed unchanged for twice the stale time; that
 * break is a plain unlink, which could race only between two breakers that both died or
 * stalled. Says whether it broke the lock, found it changed (or gone), or found another breaker
 * at work.
 */
async function breakStaleLock<Handle>(
  io: FsDriver<Handle>,
  lock: string,
  breaker: string,
  judged: LockIdentity,
  breakerWatch: Unchanged,
): Promise<"broken" | "changed" | "busy"> {
  try {
    await createHolding(io, breaker, randomBytes(TOKEN_BYTES).toString("hex"));
  } catch (error) {
    const held = await io.lstat(breaker);
    if (held === undefined) {
      if (io.classify(error) !== "not_found") return "busy";
      throw error;
    }
    if (breakerWatch.staleFor(held)) {
      await io.tidy((clean) => clean.unlink(breaker));
      breakerWatch.reset();
    }
    return "busy";
  }
  breakerWatch.reset();
  try {
    const now = await readLock(io, lock);
    if (now === undefined || now.token !== judged.token || now.identity !== judged.identity) {
      return "changed";
    }
    try {
      await io.unlink(lock);
    } catch (error) {
      if (io.classify(error) !== "not_found") throw error;
    }
    return "broken";
  } finally {
    await io.tidy((clean) => clean.unlink(breaker));
  }
}

/** Tells when a file has stayed the same for `ms` (see `firstSeen` for whose clock counts). */
class Unchanged {
  #identity: string | undefined;
  #since = 0;

  constructor(
    readonly ms: number,
    readonly localClock: boolean,
  ) {}

  staleFor(stats: FsStats): boolean {
    if (stats.identity !== this.#identity) {
      this.#identity = stats.identity;
      this.#since = firstSeen(stats.mtimeMs, this.localClock);
    }
    return Date.now() - this.#since > this.ms;
  }

  reset(): void {
    this.#identity = undefined;
  }
}
