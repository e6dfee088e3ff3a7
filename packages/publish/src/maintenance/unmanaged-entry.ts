import {
  isTempFileName,
  LEASE_FILE_NAME,
  relativeTo,
  STATE_FILE_NAME,
  type StorageEntry,
} from "@distributor/storage";

/**
 * True for an entry below `bundlePath` that no state manages: an odd name, or a file that is
 * neither a recorded output (`managed`, bundle-relative) nor distributor's own state, lease or
 * temp file. Directories count only through what they hold.
 */
export function isUnmanagedEntry(
  bundlePath: string,
  entry: StorageEntry,
  managed: ReadonlySet<string>,
): boolean {
  if (entry.nameProblem !== undefined) return true;
  if (entry.kind === "directory") return false;
  const path = relativeTo(bundlePath, entry.path);
  const name = path.slice(path.lastIndexOf("/") + 1);
  if (path === STATE_FILE_NAME || path === LEASE_FILE_NAME || isTempFileName(name)) return false;
  return !managed.has(path);
}

/** An unmanaged entry as reports show it. */
export function unmanagedEntryReport(entry: StorageEntry): ReconcileStateEntry {
  return { path: entry.path, type: entry.kind, ...(entry.size === 0 ? {} : { size: entry.size }) };
}

/** A file under the destination root that no state record manages. */
export interface ReconcileStateEntry {
  /** Backend-relative path; a name that is not a logical path is shown escaped (`bad\\xff`). */
  path: string;
  /** `directory` only for a directory whose name no logical path can hold. */
  type: "file" | "symlink" | "other" | "directory";
  /** Omitted for empty files. */
  size?: number;
}
