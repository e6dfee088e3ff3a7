import { setImmediate as nextTurn } from "node:timers/promises";
import type { StateDocument } from "@distributor/state";
import {
  DEFAULT_LISTING_LIMIT,
  isStorageError,
  joinPrefix,
  mapBounded,
  runInSlices,
  type StorageBackend,
  type StorageEntry,
} from "@distributor/storage";
import { type StoredFile, storedFile } from "../content/stored-digest.js";
import {
  DEFAULT_DESTINATION_LIMITS,
  type DestinationLimit,
  type DestinationLimits,
} from "../protocol/limits.js";
import { readDestinationStatus } from "../protocol/state-file.js";
import type { ActionDecision } from "./action.js";
import { isWriteAction } from "./action.js";
import { decideSteps, needsBundleListing } from "./decide.js";
import type { DestinationInspection, PublishTarget } from "./plan-types.js";
import { currentOwnerPaths } from "./refuse.js";

/**
 * Most entries listed under one destination bundle path while checking for unmanaged content,
 * unless the caller sets its own bound (`DestinationLimits.entries`).
 */
export const DEFAULT_DESTINATION_WALK_LIMIT = DEFAULT_LISTING_LIMIT;

export interface InspectDestinationOptions {
  signal?: AbortSignal | undefined;
  /** The destination's bounds; default `DEFAULT_DESTINATION_LIMITS`. */
  limits?: DestinationLimits | undefined;
  /** Most entries of the bundle path's listing, when `limits` is not given. */
  walkLimit?: number | undefined;
  /** Parallel `stat` calls for planned paths, when the bundle path is too full to list. */
  concurrency?: number | undefined;
}

/**
 * Reads what planning `target` needs, and no more: the state always; what is stored at the
 * planned output paths and their directories only when the state comparison chose a write (from
 * one bounded listing of the bundle path, else path by path); the complete listing when a
 * single-owner replacement must prove the path holds nothing unmanaged. A skip reads the state
 * file alone.
 */
export async function inspectDestination(
  backend: StorageBackend,
  target: PublishTarget,
  plannedPaths: readonly string[],
  options: InspectDestinationOptions = {},
): Promise<{ inspection: DestinationInspection; decision: ActionDecision }> {
  const { signal } = options;
  const bundlePath = target.bundlePath;
  const { status, version } = await readDestinationStatus(
    backend,
    bundlePath,
    signal,
    options.limits?.stateBytes,
    target.manifest,
  );
  // Parsing a big state and deciding from it are long synchronous stretches (seconds at 10⁵
  // outputs): both run in slices with the loop turning between them, so a lease held meanwhile
  // (planning again under it) is renewed on time.
  await nextTurn();
  const decision = await runInSlices(decideSteps(target, status));
  const inspection: DestinationInspection = {
    bundlePath,
    status,
    stateVersion: version,
    existingOutputs: new Map(),
    maxPathBytes: backend.maxPathBytes,
  };
  const repairing = target.repair && decision.action === "skip_same";
  // A completion or a replacement under `--repair` also looks at the bytes of what it keeps.
  const keeping = decision.action === "complete" || decision.action === "replace_older";
  if (repairing || (target.repair && keeping)) {
    inspection.stored = await storedOwnerOutputs(
      backend,
      target,
      status.state,
      plannedPaths,
      options,
    );
    if (repairing) return { inspection, decision };
  }
  if (!isWriteAction(decision.action)) return { inspection, decision };

  // One listing of the bundle path answers every planned path at once: one LIST page per 1 000
  // keys on S3 and one READDIR per directory over SFTP, instead of a round trip per path. It is
  // bounded, so a bundle path crowded with other content falls back to one stat per path.
  const listingNeeded = needsBundleListing(target, decision);
  const entryLimit = listingLimit(options);
  const limit = listingNeeded
    ? entryLimit.value
    : Math.min(entryLimit.value, plannedPaths.length * LISTING_FACTOR + LISTING_SLACK);
  let entries: readonly StorageEntry[] | undefined;
  try {
    // Reading the state found nothing at the bundle path (no state, no other content): there
    // is nothing to list either.
    const empty = status.state === undefined && status.stateError === undefined;
    entries =
      empty && !status.hasContents
        ? []
        : await backend.walk(bundlePath, { recursive: true, limit, signal });
  } catch (error) {
    // Too much to list: a replacement that had to prove the path clean is refused (the plan
    // says so). Otherwise the listing was only a shortcut: whatever stopped it (too many
    // entries, an unreadable directory elsewhere below the path), ask path by path instead.
    if (listingNeeded) {
      if (!isStorageError(error, "limit_exceeded")) throw error;
      inspection.bundleListingLimit = limit;
      inspection.bundleListingSetting = entryLimit.setting;
    } else if (!isStorageError(error) || signal?.aborted) {
      throw error;
    }
  }
  if (listingNeeded && entries !== undefined) inspection.bundleEntries = entries;

  const directories = [...directoriesOf(plannedPaths)];
  // What this owner manages now may be overwritten or deleted: the plan fences both on the
  // version seen here (docs/design/commit-protocol.md, fencing).
  const owned = [...currentOwnerPaths(target.owner, status.state)];
  const listed =
    entries === undefined
      ? await statPaths(backend, bundlePath, [...plannedPaths, ...owned, ...directories], options)
      : listedPaths(bundlePath, entries);
  const kindOf = new Map([...listed].map(([path, found]) => [path, found.kind]));
  inspection.versions = new Map(
    [...plannedPaths, ...owned].flatMap((path) => {
      const version = listed.get(path)?.version;
      return version === undefined ? [] : [[path, version] as const];
    }),
  );
  inspection.existingOutputs = new Map(
    plannedPaths.flatMap((path) => {
      const kind = kindOf.get(path);
      return kind === undefined ? [] : [[path, kind] as const];
    }),
  );
  inspection.existingSizes = new Map(
    plannedPaths.flatMap((path) => {
      const found = listed.get(path);
      return found?.kind === "file" && found.size !== undefined
        ? [[path, found.size] as const]
        : [];
    }),
  );
  // A planned path below something that is not a directory cannot be written: find those now,
  // not half-way through the writes.
  inspection.blockingAncestors = new Map(
    directories.flatMap((dir) => {
      const kind = kindOf.get(dir);
      return kind === undefined || kind === "directory" ? [] : [[dir, kind] as const];
    }),
  );
  return { inspection, decision };
}

/** The bound on the bundle path's listing: `limits.entries`, else `walkLimit`, else the default. */
function listingLimit(options: InspectDestinationOptions): DestinationLimit {
  if (options.limits !== undefined) return options.limits.entries;
  if (options.walkLimit !== undefined) return { value: options.walkLimit };
  return DEFAULT_DESTINATION_LIMITS.entries;
}

/**
 * For a repair: every output the owner's state records, hashed (a bounded number at a time), so
 * that planning sees which are missing or changed, and the planned paths no owner records.
 */
async function storedOwnerOutputs(
  backend: StorageBackend,
  target: PublishTarget,
  state: StateDocument | undefined,
  plannedPaths: readonly string[],
  options: InspectDestinationOptions,
): Promise<Map<string, StoredFile>> {
  // Planned paths no owner records are looked at too: a repair publishes them where nothing is.
  const recorded = new Set((state?.outputs ?? []).map((output) => output.path));
  const unrecorded = plannedPaths.filter((path) => !recorded.has(path));
  const paths = [...new Set([...currentOwnerPaths(target.owner, state), ...unrecorded])];
  const found = await mapBounded(paths, options.concurrency ?? 4, (path) =>
    storedFile(backend, joinPrefix(target.bundlePath, path), options.signal),
  );
  return new Map(paths.map((path, index) => [path, found[index] as StoredFile]));
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

/** A listing of the bundle path may hold this many entries per planned path (plus the slack). */
const LISTING_FACTOR = 4;
const LISTING_SLACK = 1_000;

/** What planning knows of one stored path: its kind, and a file's version token. */
interface StoredPath {
  kind: StorageEntry["kind"];
  version?: string | undefined;
  size?: number | undefined;
}

/**
 * Stored paths by bundle-relative path from a listing. A symlink is reported as `other`, as a
 * stat that refuses it is, so both ways of asking give the plan the same answer.
 */
export function listedPaths(
  bundlePath: string,
  entries: readonly StorageEntry[],
): Map<string, StoredPath> {
  const found = new Map<string, StoredPath>();
  const prefix = bundlePath === "" ? "" : `${bundlePath}/`;
  for (const entry of entries) {
    if (entry.nameProblem !== undefined || !entry.path.startsWith(prefix)) continue;
    const kind = entry.kind === "symlink" ? "other" : entry.kind;
    found.set(entry.path.slice(prefix.length), { kind, version: entry.version, size: entry.size });
  }
  return found;
}

/** The given bundle-relative paths, one stat each (bounded parallelism). */
async function statPaths(
  backend: StorageBackend,
  bundlePath: string,
  paths: readonly string[],
  options: InspectDestinationOptions,
): Promise<Map<string, StoredPath>> {
  const unique = [...new Set(paths)];
  const stored = await mapBounded(unique, options.concurrency ?? 8, (path) =>
    storedPath(backend, joinPrefix(bundlePath, path), options.signal),
  );
  const found = new Map<string, StoredPath>();
  unique.forEach((path, index) => {
    const entry = stored[index];
    if (entry !== undefined) found.set(path, entry);
  });
  return found;
}

/** What is stored at `path`: a symlink the backend refuses to stat still counts as something. */
async function storedPath(
  backend: StorageBackend,
  path: string,
  signal: AbortSignal | undefined,
): Promise<StoredPath | undefined> {
  try {
    const entry = await backend.stat(path, { signal });
    return { kind: entry.kind, version: entry.version, size: entry.size };
  } catch (error) {
    if (isStorageError(error, "not_found")) return undefined;
    if (isStorageError(error, "unsupported")) return { kind: "other" };
    throw error;
  }
}
