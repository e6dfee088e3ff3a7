import { lstat, open, unlink } from "node:fs/promises";
import { join } from "node:path";
import { swapBreakerName, swapLockName } from "../names.js";
import { hasCode } from "./errno.js";

/** A swap lock older than this is left by a killed process: the critical section takes microseconds. */
export const STALE_SWAP_LOCK_MS = 2000;

/**
 * Runs `body` holding an exclusive lock file beside the target `name` in `directory`. The lock's
 * name is derived from the target's and follows the reserved temp pattern, so leftovers are
 * recognised as debris. A lock older than `STALE_SWAP_LOCK_MS` is broken, by exactly one waiter
 * (see `breakStaleLock`).
 */
export async function withSwapLock<T>(
  directory: string,
  name: string,
  body: () => Promise<T>,
): Promise<T> {
  const lock = join(directory, swapLockName(name));
  for (;;) {
    try {
      await (await open(lock, "wx", 0o600)).close();
      break;
    } catch (error) {
      if (!hasCode(error, "EEXIST")) throw error;
      if (!(await breakStaleLock(lock, join(directory, swapBreakerName(name))))) {
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
    }
  }
  try {
    return await body();
  } finally {
    await unlink(lock).catch(() => undefined);
  }
}

/**
 * Removes `lock` if it is stale, and true when it did. Two waiters that both saw the same stale
 * lock must not both remove "it": the second would remove the fresh lock the first has taken
 * since. So a breaker first creates `breaker` exclusively, then looks again under it and removes
 * the lock only if it is still the very file (device and inode) it judged stale. A breaker file
 * left by a killed breaker is itself removed once stale; that break is a plain unlink, which
 * could race only between two breakers that both died or stalled.
 */
async function breakStaleLock(lock: string, breaker: string): Promise<boolean> {
  const seen = await lstat(lock).catch(() => undefined);
  if (seen === undefined) return true;
  if (Date.now() - seen.mtimeMs <= STALE_SWAP_LOCK_MS) return false;
  try {
    await (await open(breaker, "wx", 0o600)).close();
  } catch (error) {
    if (!hasCode(error, "EEXIST")) throw error;
    const held = await lstat(breaker).catch(() => undefined);
    if (held !== undefined && Date.now() - held.mtimeMs > STALE_SWAP_LOCK_MS * 2) {
      await unlink(breaker).catch(() => undefined);
    }
    return false;
  }
  try {
    const now = await lstat(lock).catch(() => undefined);
    if (now === undefined) return true;
    if (now.ino !== seen.ino || now.dev !== seen.dev || now.mtimeMs !== seen.mtimeMs) return false;
    await unlink(lock).catch((error: unknown) => {
      if (!hasCode(error, "ENOENT")) throw error;
    });
    return true;
  } finally {
    await unlink(breaker).catch(() => undefined);
  }
}
