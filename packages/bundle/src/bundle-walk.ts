import { isStorageError, type StorageBackend, type StorageEntry } from "@distributor/storage";
import { type BundleIssue, BundleValidationError } from "./errors.js";
import { walkRefusal } from "./file-problem.js";
import { MANIFEST_FILE_NAME } from "./manifest.js";

/** Walk bound for a bundle of at most `maxFiles` files, with room for a directory per file. */
export function walkLimit(maxFiles: number): number {
  return maxFiles * 2 + 64;
}

/**
 * Lists a bundle directory once, recursively and bounded by `limit` entries. A larger tree fails
 * as `too_many_entries` (`limitNote` says where the bound came from) and an entry the backend
 * refuses to list (a symlink on local storage) as `unsupported_entry`.
 */
export async function walkBundle(
  backend: StorageBackend,
  bundlePath: string,
  limit: number,
  options: { signal?: AbortSignal | undefined; limitNote?: string },
): Promise<StorageEntry[]> {
  try {
    return await backend.walk(bundlePath, { recursive: true, limit, signal: options.signal });
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
