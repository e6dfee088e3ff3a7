import { type DestinationStatus, isSingleOwnerState, parseDocument } from "@distributor/state";
import {
  isStorageError,
  joinPrefix,
  STATE_FILE_NAME,
  type StorageBackend,
  statePath,
} from "@distributor/storage";
import { mapPool } from "./pool.js";

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/** State files larger than this are treated as invalid rather than read into memory. */
export const MAX_STATE_BYTES = 64 * 1024 * 1024;
/** Most entries listed under one destination bundle path while checking for unmanaged content. */
export const DEFAULT_DESTINATION_WALK_LIMIT = 100_000;

/** What the planner needs to know about one destination bundle path, as plain data. */
export interface DestinationInspection {
  bundlePath: string;
  status: DestinationStatus;
  /** Planned output paths (relative to the bundle path) that already exist in storage. */
  existingOutputPaths: string[];
  /**
   * Files below the bundle path (relative, without the state file). Listed only when the path
   * holds single-owner state, so that a replacement can prove it holds nothing unmanaged.
   */
  bundleFiles?: string[];
  /** Set instead of `bundleFiles` when the bundle path holds more entries than this limit. */
  bundleListingLimit?: number;
}

export interface InspectDestinationOptions {
  signal?: AbortSignal | undefined;
  walkLimit?: number | undefined;
  /** Parallel `stat` calls for planned paths. */
  concurrency?: number | undefined;
}

/** Reads and parses a destination's state file; an unreadable or invalid file becomes `stateError`. */
export async function readDestinationStatus(
  backend: StorageBackend,
  bundlePath: string,
  signal?: AbortSignal,
): Promise<DestinationStatus> {
  const hasContents = await backend.hasAny(bundlePath, { signal });
  let bytes: Uint8Array;
  try {
    bytes = await backend.readFile(statePath(bundlePath), { signal, maxBytes: MAX_STATE_BYTES });
  } catch (error) {
    if (isStorageError(error, "not_found")) return { hasContents };
    if (isStorageError(error, "limit_exceeded")) return { hasContents, stateError: error };
    throw error;
  }
  try {
    // Bytes that are not UTF-8 cannot be state distributor wrote: invalid, like a parse error.
    return { hasContents, state: parseDocument(strictUtf8.decode(bytes)) };
  } catch (error) {
    return { hasContents, stateError: error };
  }
}

export async function inspectDestination(
  backend: StorageBackend,
  bundlePath: string,
  plannedPaths: readonly string[],
  options: InspectDestinationOptions = {},
): Promise<DestinationInspection> {
  const { signal } = options;
  const status = await readDestinationStatus(backend, bundlePath, signal);
  const exists = await mapPool(plannedPaths, options.concurrency ?? 8, async (path) => {
    try {
      await backend.stat(joinPrefix(bundlePath, path), { signal });
      return true;
    } catch (error) {
      if (isStorageError(error, "not_found")) return false;
      throw error;
    }
  });
  const inspection: DestinationInspection = {
    bundlePath,
    status,
    existingOutputPaths: plannedPaths.filter((_, index) => exists[index]),
  };
  if (status.state !== undefined && isSingleOwnerState(status.state)) {
    const limit = options.walkLimit ?? DEFAULT_DESTINATION_WALK_LIMIT;
    try {
      const entries = await backend.walk(bundlePath, { recursive: true, limit, signal });
      const prefixLength = bundlePath === "" ? 0 : bundlePath.length + 1;
      inspection.bundleFiles = entries
        .filter((entry) => entry.kind === "file")
        .map((entry) => entry.path.slice(prefixLength))
        .filter((path) => path !== STATE_FILE_NAME);
    } catch (error) {
      // Too much to list only matters if a replacement has to prove the path holds nothing
      // unmanaged; a skip must not fail because of it.
      if (!isStorageError(error, "limit_exceeded")) throw error;
      inspection.bundleListingLimit = limit;
    }
  }
  return inspection;
}
