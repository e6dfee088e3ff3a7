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
  const segments = logical.split("/");
  for (let index = 0; index < segments.length; index++) {
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
    if (last) {
      if (stats.isFile()) return { kind: "file", stats };
      if (stats.isDirectory()) return { kind: "directory", stats };
      return { kind: "other", stats };
    }
  }
  // Unreachable: a validated logical path has at least one segment.
  return { kind: "missing", existing: 0 };
}
