import { randomBytes } from "node:crypto";
import { swapBreakerName, swapLockName, throwIfAborted } from "@distributor/storage/adapter";
import type { Attributes } from "ssh2";
import { hasStatus, STATUS } from "./errors.js";
import type { Remote } from "./remote.js";

/**
 * A swap lock still there after this long (as we observe it, so clocks of client and server
 * need not agree) was left by a dead writer: the critical section is a few round trips.
 */
export const STALE_SWAP_LOCK_MS = 5_000;

/** How long a waiter sleeps between two looks at a held lock. */
const RETRY_MS = 5;

/** Bytes of the token each holder writes into its lock file. */
const TOKEN_BYTES = 16;

function beside(parent: string, name: string): string {
  return parent === "" ? name : `${parent}/${name}`;
}

/**
 * Runs `body` holding the swap lock of the target `name` in the logical directory `parent`: a
 * file created exclusively beside the target (the name the local backend uses), holding a random
 * token of its holder. A compare-and-swap and a fenced delete check the version and act under
 * it, so of several of them on one version exactly one acts. A lock that stays the same file
 * for `staleMs` is broken, by exactly one waiter (see `breakStaleLock`).
 */
export async function withSwapLock<T>(
  remote: Remote,
  parent: string,
  name: string,
  body: () => Promise<T>,
  staleMs = STALE_SWAP_LOCK_MS,
): Promise<T> {
  // The lock's own handles stay on one channel; the body keeps the caller's view.
  const lane = remote.onLane();
  const lock = beside(parent, swapLockName(name));
  const breaker = beside(parent, swapBreakerName(name));
  const token = randomBytes(TOKEN_BYTES).toString("hex");
  const breakerWatch = new Unchanged(staleMs * 2);
  // The lock as first seen (read once per new size and mtime), and since when.
  let sighting: { lock: LockIdentity; since: number } | undefined;
  let vanished = 0;
  for (;;) {
    throwIfAborted(remote.signal);
    let refusal: unknown;
    try {
      await createHolding(lane, lock, token);
      break;
    } catch (error) {
      refusal = error;
    }
    const held = await lane.lstat(lock);
    if (held === undefined) {
      // Released meanwhile; a failure that keeps coming without a lock is not contention.
      if (!hasStatus(refusal, STATUS.FAILURE) || ++vanished > 100) throw refusal;
      continue;
    }
    if (sighting === undefined || !sameAttributes(sighting.lock, held)) {
      const seen = await readLock(lane, lock);
      sighting = seen === undefined ? undefined : { lock: seen, since: Date.now() };
      continue;
    }
    if (Date.now() - sighting.since > staleMs) {
      // While another waiter breaks it, the lock stays judged stale: this one tries again soon.
      const outcome = await breakStaleLock(lane, lock, breaker, sighting.lock, breakerWatch);
      if (outcome !== "busy") {
        sighting = undefined;
        continue;
      }
    }
    await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
  }
  try {
    return await body();
  } finally {
    await lane.tidy((sftp, done) => sftp.unlink(lane.path(lock), done));
  }
}

/**
 * Creates `path` exclusively (CREAT|EXCL, which OpenSSH reports as a generic FAILURE when the
 * file exists) holding `token`. The token goes out right behind the open's answer, with the
 * close, in one round trip; until it lands the file is empty, which `breakStaleLock` allows for.
 */
async function createHolding(remote: Remote, path: string, token: string): Promise<void> {
  const handle = await remote.call<Buffer>((sftp, done) =>
    sftp.open(remote.path(path), "wx", done),
  );
  const bytes = Buffer.from(token);
  const written = remote.call((sftp, done) => sftp.write(handle, bytes, 0, bytes.length, 0, done));
  const closed = remote.call((sftp, done) => sftp.close(handle, done));
  try {
    await Promise.all([written, closed]);
  } catch (error) {
    await Promise.allSettled([written, closed]);
    await remote.tidy((sftp, done) => sftp.unlink(remote.path(path), done));
    throw error;
  }
}

/** What identifies one lock file: its holder's token, and its size and mtime as SFTP gives them. */
interface LockIdentity {
  token: string;
  size: number;
  mtime: number;
}

function sameAttributes(lock: LockIdentity, attrs: Attributes): boolean {
  return lock.size === attrs.size && lock.mtime === attrs.mtime;
}

function sameLock(left: LockIdentity, right: LockIdentity): boolean {
  return left.token === right.token && left.size === right.size && left.mtime === right.mtime;
}

/** Reads the lock file at `path` through one handle, or undefined when it is gone. */
async function readLock(remote: Remote, path: string): Promise<LockIdentity | undefined> {
  let handle: Buffer;
  try {
    handle = await remote.call<Buffer>((sftp, done) => sftp.open(remote.path(path), "r", done));
  } catch (error) {
    if (hasStatus(error, STATUS.NO_SUCH_FILE)) return undefined;
    throw error;
  }
  const buffer = Buffer.alloc(TOKEN_BYTES * 2);
  // All three go out together: one round trip.
  const described = remote.call<Attributes>((sftp, done) => sftp.fstat(handle, done));
  const read = remote
    .call<number>((sftp, done) =>
      sftp.read(handle, buffer, 0, buffer.length, 0, (error, bytesRead) => done(error, bytesRead)),
    )
    .catch((error: unknown) => {
      if (hasStatus(error, STATUS.EOF)) return 0;
      throw error;
    });
  const closed = remote.tidy((sftp, done) => sftp.close(handle, done));
  try {
    const [attrs, length] = await Promise.all([described, read]);
    return { token: buffer.toString("utf8", 0, length), size: attrs.size, mtime: attrs.mtime };
  } finally {
    await Promise.allSettled([described, read, closed]);
  }
}

/**
 * Removes `lock` if it is still the file judged stale (`judged`, read when first seen). Two
 * waiters that both judged one lock stale must not both remove "it": the second would remove the
 * fresh lock the first has taken since. So a breaker first creates `breaker` exclusively, then
 * reads the lock again under it and removes it only if it is still the very file it judged stale:
 * same token, size and mtime. SFTP attributes have no inode and whole-second mtimes, so two locks
 * of one second and one size look alike; the holders' tokens tell them apart (only two locks
 * whose holders both died before writing their token, within one second, still could not be).
 * A breaker file left by a dead breaker is removed once it has stayed unchanged for twice the
 * stale time; that break is a plain unlink, which could race only between two breakers that
 * both died or stalled. Says whether it broke the lock, found it changed (or gone), or found
 * another breaker at work.
 */
async function breakStaleLock(
  remote: Remote,
  lock: string,
  breaker: string,
  judged: LockIdentity,
  breakerWatch: Unchanged,
): Promise<"broken" | "changed" | "busy"> {
  try {
    await createHolding(remote, breaker, randomBytes(TOKEN_BYTES).toString("hex"));
  } catch (error) {
    const held = await remote.lstat(breaker);
    if (held === undefined) {
      if (hasStatus(error, STATUS.FAILURE)) return "busy";
      throw error;
    }
    if (breakerWatch.staleFor(held)) {
      await remote.tidy((sftp, done) => sftp.unlink(remote.path(breaker), done));
      breakerWatch.reset();
    }
    return "busy";
  }
  breakerWatch.reset();
  try {
    const now = await readLock(remote, lock);
    if (now === undefined || !sameLock(now, judged)) return "changed";
    try {
      await remote.call((sftp, done) => sftp.unlink(remote.path(lock), done));
    } catch (error) {
      if (!hasStatus(error, STATUS.NO_SUCH_FILE)) throw error;
    }
    return "broken";
  } finally {
    await remote.tidy((sftp, done) => sftp.unlink(remote.path(breaker), done));
  }
}

/**
 * Tells when a file has stayed the same (size, mtime, owner) for `ms` as this process observes
 * it, so staleness never compares the server's clock with ours.
 */
class Unchanged {
  #identity: string | undefined;
  #since = 0;

  constructor(readonly ms: number) {}

  staleFor(attrs: Attributes): boolean {
    const identity = `${attrs.size}-${attrs.mtime}-${attrs.uid}`;
    if (identity !== this.#identity) {
      this.#identity = identity;
      this.#since = Date.now();
      return false;
    }
    return Date.now() - this.#since > this.ms;
  }

  reset(): void {
    this.#identity = undefined;
  }
}
