import type { Stats } from "node:fs";
import { lstatSync, statSync } from "node:fs";
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

// These lstats are synchronous on purpose: each answers from the inode cache in microseconds,
// while a thread-pool round trip costs tens of them in handoffs, several times per file. That is
// also why every component is checked on every call rather than remembered: a remembered
// directory can be moved out of the root and replaced by a symlink to where it went, which its
// device and inode would not reveal.

/**
 * Lstats every component from the root down so a symlink anywhere below the root is refused
 * (`unsupported`) instead of followed out of it. The root itself is trusted operator configuration.
 * Checking then acting is not atomic; the final component is additionally opened with O_NOFOLLOW
 * where that matters (reads), and renames/unlinks never follow a final symlink.
 */
export async function inspectPath(
  local: LocalRoot,
  logical: string,
  operation: StorageOperation,
): Promise<PathState> {
  return inspectSegments(local, logical, operation, logical.split("/"));
}

/**
 * Whether the parent of `logical` is a real directory (no symlink on the way), checked as
 * `inspectPath` checks, for callers that then open the final component themselves with
 * O_NOFOLLOW and fstat it. A path at the root has the trusted root as its parent.
 */
export async function parentIsDirectory(
  local: LocalRoot,
  logical: string,
  operation: StorageOperation,
): Promise<boolean> {
  const segments = logical.split("/");
  if (segments.length === 1) return true;
  const parent = await inspectSegments(local, logical, operation, segments.slice(0, -1));
  return parent.kind === "directory";
}

/** Lstats `segments` from the root down (see `inspectPath`). */
async function inspectSegments(
  local: LocalRoot,
  logical: string,
  operation: StorageOperation,
  segments: readonly string[],
): Promise<PathState> {
  let partial = "";
  for (let index = 0; index < segments.length; index++) {
    partial = index === 0 ? segments[0]! : `${partial}/${segments[index]}`;
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
    if (stats === undefined) {
      // Some Node versions report ENOTDIR as "no entry" too; below the first segment the parent
      // was just seen to be a directory, so only a root that is not one can cause it.
      if (index === 0 && rootIsNotDirectory(local)) {
        throw rootNotDirectory(local, operation, logical);
      }
      return { kind: "missing", existing: index };
    }
    if (stats.isSymbolicLink()) throw symlinkRefused(operation, logical, partial);
    const last = index === segments.length - 1;
    if (!last && !stats.isDirectory()) return { kind: "blocked", at: partial };
    if (last) {
      if (stats.isFile()) return { kind: "file", stats };
      if (stats.isDirectory()) return { kind: "directory", stats };
      return { kind: "other", stats };
    }
  }
  // Unreachable: a validated logical path has at least one segment.
  return { kind: "missing", existing: 0 };
}

function rootIsNotDirectory(local: LocalRoot): boolean {
  try {
    // The root may be reached through symlinks (trusted configuration): follow them.
    const root = statSync(local.root, { throwIfNoEntry: false });
    return root !== undefined && !root.isDirectory();
  } catch (error) {
    return hasCode(error, "ENOTDIR");
  }
}
