import {
  displayPath,
  isStorageError,
  isWithinPrefix,
  relativeTo,
  type StorageError,
} from "@distributor/storage";
import type { BundleIssue } from "./errors.js";

/**
 * A storage failure on one bundle file as a bundle issue: the file is missing (`missing` says how
 * that came about), or it is something the backend refuses to read as a file (a symlink, a
 * directory, a device). Failures of the storage itself (unavailable, permission, limits) say
 * nothing about the bundle: undefined, so they propagate.
 */
export function fileIssue(error: unknown, path: string, missing: string): BundleIssue | undefined {
  if (isStorageError(error, "not_found")) {
    return { code: "missing_file", path, message: `${path}: ${missing}` };
  }
  if (isStorageError(error, "unsupported")) {
    const message = `${path}: not a regular file: ${storageDetail(error)}`;
    return { code: "not_regular_file", path, message };
  }
  return undefined;
}

/** The backend's own explanation, without its `operation backend:path:` prefix. */
export function storageDetail(error: StorageError): string {
  const prefix = `${error.operation} ${error.backend}:${displayPath(error.path)}: `;
  return error.message.startsWith(prefix) ? error.message.slice(prefix.length) : error.message;
}

// Walks report the walked prefix as the error path and quote the offending entry in the detail.
const QUOTED_ENTRY = /^"([^"]+)" is (?:a symlink|not a regular file)/;

/**
 * A walk of the bundle refused by the backend (`unsupported`: a symlink, a device, a name that is
 * no logical path) as a bundle issue naming the entry, when the backend's message lets us find it.
 */
export function walkRefusal(error: unknown, bundlePath: string): BundleIssue | undefined {
  if (!isStorageError(error, "unsupported")) return undefined;
  const detail = storageDetail(error);
  const quoted = QUOTED_ENTRY.exec(detail)?.[1];
  let path = "";
  if (quoted !== undefined && isWithinPrefix(bundlePath, quoted))
    path = relativeTo(bundlePath, quoted);
  else if (error.path !== bundlePath && isWithinPrefix(bundlePath, error.path)) {
    path = relativeTo(bundlePath, error.path);
  }
  return {
    code: "unsupported_entry",
    path,
    message: `${displayPath(path)}: refused by ${error.backend} storage: ${detail}`,
  };
}
