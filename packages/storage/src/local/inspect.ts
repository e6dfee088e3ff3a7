import type { Stats } from "node:fs";
import { lstat } from "node:fs/promises";
import type { StorageOperation } from "../errors.js";
import { type LocalRoot, nativePath, rootNotDirectory, symlinkRefused } from "./context.js";
import { hasCode, toStorageError } from "./errno.js";

/** What lies at a logical path, found without following any symlink below the root. */
export type PathState =
  /** The first `existing` segments are directories; the next one does not exist. */
  | { kind: "missing"; existing: number }
  /** An ancestor (`at`, logical) is not a directory, so the path cannot exist. */
  | { kind: "blocked"; at: string }
  | { kind: "file"; stats: Stats }
  | { kind: "directory"; stats: Stats }
  /** A FIFO, socket or device: never read, written or deleted. */
  | { kind: "other"; stats: Stats };

/** Verified directories remembered per backend; past this the cache starts over. */
const VERIFIED_LIMIT = 10_000;

/**
 * Lstats every component from the root down so a symlink anywhere below the root is refused
 * (`unsupported`) instead of followed out of it. The root itself is trusted operator configuration.
 * Checking then acting is not atomic; the final component is additionally opened with O_NOFOLLOW
 * where that matters (reads), and renames/unlinks never follow a final symlink.
 *
 * A directory verified that way is remembered with its device and inode, and later calls below it
 * lstat only that directory and the components under it: a component above it swapped for a
 * symlink (or renamed away) makes the path resolve to another inode, or to nothing, and the call
 * then forgets what it remembered and checks every component again. So a run pays one lstat for
 * the ancestors it already verified instead of one per ancestor, and the window between check and
 * use stays what it was: one lstat wide.
 */
export async function inspectPath(
  local: LocalRoot,
  logical: string,
  operation: StorageOperation,
): Promise<PathState> {
  const segments = logical.split("/");
  const start = await verifiedAncestor(local, segments);
  for (let index = start; index < segments.length; index++) {
    const partial = segments.slice(0, index + 1).join("/");
    let stats: Stats;
    try {
      stats = await lstat(nativePath(local, partial));
    } catch (error) {
      if (hasCode(error, "ENOENT")) return { kind: "missing", existing: index };
      if (hasCode(error, "ENOTDIR")) {
        if (index === 0) throw rootNotDirectory(local, operation, logical);
        return { kind: "blocked", at: segments.slice(0, index).join("/") };
      }
      throw toStorageError(error, operation, logical);
    }
    if (stats.isSymbolicLink()) throw symlinkRefused(operation, logical, partial);
    const last = index === segments.length - 1;
    if (!last && !stats.isDirectory()) return { kind: "blocked", at: partial };
    if (stats.isDirectory()) remember(local, partial, stats);
    if (last) {
      if (stats.isFile()) return { kind: "file", stats };
      if (stats.isDirectory()) return { kind: "directory", stats };
      return { kind: "other", stats };
    }
  }
  // Unreachable: a validated logical path has at least one segment.
  return { kind: "missing", existing: 0 };
}

/**
 * How many leading segments are known to be real directories: the deepest remembered proper
 * ancestor, confirmed by one lstat that still finds the same directory there. 0 when none is.
 */
async function verifiedAncestor(local: LocalRoot, segments: readonly string[]): Promise<number> {
  if (local.verified.size === 0) return 0;
  for (let depth = segments.length - 1; depth > 0; depth--) {
    const ancestor = segments.slice(0, depth).join("/");
    const known = local.verified.get(ancestor);
    if (known === undefined) continue;
    const stats = await lstat(nativePath(local, ancestor)).catch(() => undefined);
    if (
      stats !== undefined &&
      stats.isDirectory() &&
      stats.dev === known.dev &&
      stats.ino === known.ino
    ) {
      return depth;
    }
    // Gone or replaced: whatever was learned through it may be stale too.
    local.verified.clear();
    return 0;
  }
  return 0;
}

function remember(local: LocalRoot, logical: string, stats: Stats): void {
  if (local.verified.size >= VERIFIED_LIMIT) local.verified.clear();
  local.verified.set(logical, { dev: stats.dev, ino: stats.ino });
}
