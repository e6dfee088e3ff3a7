import {
  isReservedName,
  isStorageError,
  relativeTo,
  runInSlices,
  type Steps,
  type StorageBackend,
  type StorageEntry,
  StorageError,
} from "@distributor/storage";
import { type BundleIssue, BundleValidationError } from "./errors.js";
import { walkRefusal } from "./file-problem.js";
import { MANIFEST_FILE_NAME } from "./manifest-checks.js";

/** Walk bound for a bundle of at most `maxFiles` files, with room for a directory per file. */
export function walkLimit(maxFiles: number): number {
  return maxFiles * 2 + 64;
}

/** A bundle directory as listed once: what it may hold, and what no bundle may hold. */
export interface BundleListing {
  /** Regular files and directories with valid, unreserved names. */
  entries: StorageEntry[];
  /** One issue per entry no bundle may hold (symlinks, special files, odd or reserved names). */
  issues: BundleIssue[];
}

/**
 * Lists a bundle directory once, recursively and bounded by `limit` entries. A larger tree fails
 * as `too_many_entries` (`limitNote` says where the bound came from); a bundle path the backend
 * refuses to list (a symlink on local storage) as `unsupported_entry`.
 */
export async function walkBundle(
  backend: StorageBackend,
  bundlePath: string,
  limit: number,
  options: {
    signal?: AbortSignal | undefined;
    limitNote?: string;
    /** Entries below the bundle path from a listing the caller made already: no walk then. */
    listed?: readonly StorageEntry[] | undefined;
  },
): Promise<BundleListing> {
  let entries: readonly StorageEntry[];
  try {
    if (options.listed === undefined) {
      const signal = options.signal;
      // Validation reads names, kinds and sizes only.
      entries = await backend.walk(bundlePath, { recursive: true, limit, signal, bare: true });
    } else {
      entries = options.listed;
      if (entries.length > limit) {
        throw backendLimit(backend, bundlePath, limit);
      }
    }
  } catch (error) {
    if (isStorageError(error, "limit_exceeded")) {
      const note = options.limitNote === undefined ? "" : ` (${options.limitNote})`;
      const issue: BundleIssue = {
        code: "too_many_entries",
        path: "",
        message: `bundle holds more than ${limit} files and directories${note}`,
        expected: limit,
      };
      throw new BundleValidationError([issue], { bundlePath, cause: error });
    }
    const refusal = walkRefusal(error, bundlePath);
    if (refusal !== undefined) {
      throw new BundleValidationError([refusal], { bundlePath, cause: error });
    }
    throw error;
  }
  return runInSlices(checkedEntriesSteps(entries, bundlePath));
}

/** Entries looked at between two pauses of a check of every entry (a million at most). */
const STEP_ENTRIES = 2000;

function* checkedEntriesSteps(
  entries: readonly StorageEntry[],
  bundlePath: string,
): Steps<BundleListing> {
  const listing: BundleListing = { entries: [], issues: [] };
  for (const [index, entry] of entries.entries()) {
    if (index % STEP_ENTRIES === STEP_ENTRIES - 1) yield;
    const issue = entryIssue(entry, bundlePath, { reserved: true });
    if (issue === undefined) listing.entries.push(entry);
    else listing.issues.push(issue);
  }
  return listing;
}

/** The error a walk past its limit fails with, for a listing that was made elsewhere. */
function backendLimit(backend: StorageBackend, bundlePath: string, limit: number): StorageError {
  return new StorageError({
    kind: "limit_exceeded",
    operation: "walk",
    backend: backend.name,
    path: bundlePath,
    detail: `more than ${limit} entries`,
  });
}

/**
 * Why a listed entry cannot be part of a bundle, or undefined when it can: a name that is not a
 * logical path (shown escaped), a symlink or special file, or (with `reserved`) a name distributor
 * keeps for its own files at any depth.
 */
export function entryIssue(
  entry: StorageEntry,
  prefix: string,
  options: { reserved: boolean },
): BundleIssue | undefined {
  const path = relativeTo(prefix, entry.path);
  if (entry.nameProblem !== undefined) {
    return { code: "invalid_name", path, message: `${path}: ${entry.nameProblem}` };
  }
  if (entry.kind === "symlink") {
    return {
      code: "unsupported_entry",
      path,
      message: `${path}: is a symlink; symlinks are refused`,
    };
  }
  if (entry.kind === "other") {
    return {
      code: "unsupported_entry",
      path,
      message: `${path}: is not a regular file or directory`,
    };
  }
  if (options.reserved) {
    const name = path.slice(path.lastIndexOf("/") + 1);
    if (isReservedName(name)) return reservedNameIssue(path, name);
  }
  return undefined;
}

export function reservedNameIssue(path: string, name: string): BundleIssue {
  return {
    code: "forbidden_file",
    path,
    message: `${path}: ${name} is reserved for distributor's own files (state, lease, temp files) and cannot be part of a bundle`,
  };
}

/** A `manifest.json` below the bundle root: bundles never nest, whatever else is allowed. */
export function isNestedManifest(path: string): boolean {
  return path.endsWith(`/${MANIFEST_FILE_NAME}`);
}

export function nestedManifestIssue(path: string): BundleIssue {
  return {
    code: "nested_manifest",
    path,
    message: `${path}: nested ${MANIFEST_FILE_NAME} below the bundle root (bundles never nest)`,
  };
}
