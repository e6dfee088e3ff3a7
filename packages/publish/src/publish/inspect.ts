import {
  isStorageError,
  joinPrefix,
  mapBounded,
  type StorageBackend,
  type StorageEntry,
} from "@distributor/storage";
import type { ActionDecision } from "./action.js";
import { isWriteAction } from "./action.js";
import {
  type DestinationInspection,
  decideAction,
  needsBundleListing,
  type PublishTarget,
} from "./plan.js";
import { readDestinationStatus } from "./state-file.js";

/** Most entries listed under one destination bundle path while checking for unmanaged content. */
export const DEFAULT_DESTINATION_WALK_LIMIT = 100_000;

export interface InspectDestinationOptions {
  signal?: AbortSignal | undefined;
  walkLimit?: number | undefined;
  /** Parallel `stat` calls for planned paths. */
  concurrency?: number | undefined;
}

/**
 * Reads what planning `target` needs, and no more: the state always; the planned output paths
 * only when the state comparison chose a write; the whole bundle path only when a single-owner
 * replacement must prove it holds nothing unmanaged. A skip reads the state file alone.
 */
export async function inspectDestination(
  backend: StorageBackend,
  target: PublishTarget,
  plannedPaths: readonly string[],
  options: InspectDestinationOptions = {},
): Promise<{ inspection: DestinationInspection; decision: ActionDecision }> {
  const { signal } = options;
  const bundlePath = target.bundlePath;
  const { status, version } = await readDestinationStatus(backend, bundlePath, signal);
  const decision = decideAction(target, status);
  const inspection: DestinationInspection = {
    bundlePath,
    status,
    stateVersion: version,
    existingOutputs: new Map(),
  };
  if (!isWriteAction(decision.action)) return { inspection, decision };

  const found = await mapBounded(plannedPaths, options.concurrency ?? 8, (path) =>
    storedKind(backend, joinPrefix(bundlePath, path), signal),
  );
  inspection.existingOutputs = new Map(
    plannedPaths.flatMap((path, index) => {
      const kind = found[index];
      return kind === undefined ? [] : [[path, kind] as const];
    }),
  );
  // A planned path below something that is not a directory cannot be written: find those now,
  // not half-way through the writes.
  const directories = [...directoriesOf(plannedPaths)];
  const dirKinds = await mapBounded(directories, options.concurrency ?? 8, (dir) =>
    storedKind(backend, joinPrefix(bundlePath, dir), signal),
  );
  inspection.blockingAncestors = new Map(
    directories.flatMap((dir, index) => {
      const kind = dirKinds[index];
      return kind === undefined || kind === "directory" ? [] : [[dir, kind] as const];
    }),
  );
  if (needsBundleListing(target, decision)) {
    const limit = options.walkLimit ?? DEFAULT_DESTINATION_WALK_LIMIT;
    try {
      inspection.bundleEntries = await backend.walk(bundlePath, { recursive: true, limit, signal });
    } catch (error) {
      // Too much to list only refuses the replacement; the plan says so.
      if (!isStorageError(error, "limit_exceeded")) throw error;
      inspection.bundleListingLimit = limit;
    }
  }
  return { inspection, decision };
}

/** Every directory above the given paths (`a`, `a/b` for `a/b/c`). */
function directoriesOf(paths: readonly string[]): Set<string> {
  const directories = new Set<string>();
  for (const path of paths) {
    for (let index = path.indexOf("/"); index !== -1; index = path.indexOf("/", index + 1)) {
      directories.add(path.slice(0, index));
    }
  }
  return directories;
}

/** What is stored at `path`: a symlink the backend refuses to stat still counts as something. */
async function storedKind(
  backend: StorageBackend,
  path: string,
  signal: AbortSignal | undefined,
): Promise<StorageEntry["kind"] | undefined> {
  try {
    return (await backend.stat(path, { signal })).kind;
  } catch (error) {
    if (isStorageError(error, "not_found")) return undefined;
    if (isStorageError(error, "unsupported")) return "other";
    throw error;
  }
}
