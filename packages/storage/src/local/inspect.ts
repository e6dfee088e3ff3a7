import type { Stats } from "node:fs";
import { lstatSync } from "node:fs";
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

// These lstats are synchronous on purpose: each answers from the inode cache in microseconds,
// while a thread-pool round trip costs tens of them in handoffs, several times per file.

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
  return inspectSegments(local, logical, operation, logical.split("/"), false);
}

/** What lies above a logical path: its parent is a real directory, or the path cannot exist. */
export type AncestorState =
  | { kind: "ready" }
  | { kind: "missing" }
  | { kind: "blocked"; at: string };

/**
 * Checks only the ancestors of `logical`, as `inspectPath` does, for callers that then open the
 * final component themselves with O_NOFOLLOW and fstat it. A path at the root is `ready`: the
 * root is trusted.
 */
export async function inspectAncestors(
  local: LocalRoot,
  logical: string,
  operation: StorageOperation,
): Promise<AncestorState> {
  const segments = logical.split("/");
  if (segments.length === 1) return { kind: "ready" };
  const parent = segments.slice(0, -1);
  const state = await inspectSegments(local, logical, operation, parent, true);
  switch (state.kind) {
    case "directory":
      return { kind: "ready" };
    case "missing":
      return { kind: "missing" };
    case "blocked":
      return state;
    default:
      return { kind: "blocked", at: parent.join("/") };
  }
}

/**
 * Lstats `segments` from the first one not known to be a verified directory. With `directory`
 * the caller expects the last segment to be a directory too, so a remembered one may vouch for
 * itself; otherwise the last segment is always looked at.
 */
async function inspectSegments(
  local: LocalRoot,
  logical: string,
  operation: StorageOperation,
  segments: readonly string[],
  directory: boolean,
): Promise<PathState> {
  const known = await verifiedAncestor(
    local,
    segments,
    directory ? segments.length : segments.length - 1,
  );
  if (known.depth === segments.length && known.stats !== undefined) {
    return { kind: "directory", stats: known.stats };
  }
  const start = known.depth;
  for (let index = start; index < segments.length; index++) {
    const partial = segments.slice(0, index + 1).join("/");
    let stats: Stats | undefined;
    try {
      stats = lstatSync(nativePath(local, partial), { throwIfNoEntry: false });
    } catch (error) {
      if (hasCode(error, "ENOTDIR")) {
        if (index === 0) throw rootNotDirectory(local, operation, logical);
        return { kind: "blocked", at: segments.slice(0, index).join("/") };
      }
      throw toStorageError(error, operation, logical);
    }
    if (stats === undefined) return { kind: "missing", existing: index };
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
 * How many leading segments (at most `maxDepth`) are known to be real directories: the deepest
 * remembered one, confirmed by one lstat that still finds the same directory there (its stats are
 * returned). 0 when none is.
 */
async function verifiedAncestor(
  local: LocalRoot,
  segments: readonly string[],
  maxDepth: number,
): Promise<{ depth: number; stats?: Stats }> {
  if (local.verified.size === 0) return { depth: 0 };
  for (let depth = maxDepth; depth > 0; depth--) {
    const ancestor = segments.slice(0, depth).join("/");
    const known = local.verified.get(ancestor);
    if (known === undefined) continue;
    let stats: Stats | undefined;
    try {
      stats = lstatSync(nativePath(local, ancestor), { throwIfNoEntry: false });
    } catch {
      stats = undefined;
    }
    if (
      stats !== undefined &&
      stats.isDirectory() &&
      stats.dev === known.dev &&
      stats.ino === known.ino
    ) {
      return { depth, stats };
    }
    // Gone or replaced: whatever was learned through it may be stale too.
    local.verified.clear();
    return { depth: 0 };
  }
  return { depth: 0 };
}

function remember(local: LocalRoot, logical: string, stats: Stats): void {
  if (local.verified.size >= VERIFIED_LIMIT) local.verified.clear();
  local.verified.set(logical, { dev: stats.dev, ino: stats.ino });
}
