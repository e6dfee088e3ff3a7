import { isStorageError, joinPrefix, mapBounded } from "@distributor/storage";
import { DEFAULT_DESTINATION_WALK_LIMIT, listedPaths } from "../plan/inspect.js";
import type { PublishPlan } from "../plan/plan-types.js";
import { type ExecuteContext, PublishExecutionError } from "./context.js";

/** Kept outputs above this many are checked with one listing rather than one `stat` each. */
const LIST_ABOVE = 64;

/**
 * Step after the writes, before the commit: every output the replacement keeps is still the
 * version planning saw. A write that landed on one meanwhile (a stalled run's late write, or a
 * hand edit) would otherwise be recorded as the new source's bytes; the attempt fails instead,
 * before the state changes, and its `replacing` marker makes the next run check those records
 * against their bytes.
 */
export async function confirmKept(
  context: ExecuteContext,
  plan: PublishPlan,
  concurrency: number,
): Promise<void> {
  const kept = Object.entries(plan.keptVersions ?? {});
  if (kept.length === 0) return;
  const found =
    (kept.length > LIST_ABOVE ? await listedVersions(context, plan) : undefined) ??
    (await statVersions(context, plan, kept, concurrency));
  const moved = kept.filter(([path, version]) => found.get(path) !== version).map(([path]) => path);
  if (moved.length === 0) return;
  const shown = moved.slice(0, 5).join(", ");
  const more = moved.length > 5 ? ` (and ${moved.length - 5} more)` : "";
  throw new PublishExecutionError(
    `${moved.length} output(s) the replacement keeps changed while it ran: ${shown}${more}; nothing was committed, and the next run checks them against their records`,
  );
}

/**
 * Versions of every file below the bundle path, from one listing; undefined when the path holds
 * more entries than a listing may return (planning then asked path by path too).
 */
async function listedVersions(
  context: ExecuteContext,
  plan: PublishPlan,
): Promise<Map<string, string | undefined> | undefined> {
  const { destination, signal } = context;
  try {
    const entries = await destination.walk(plan.bundlePath, {
      recursive: true,
      limit: context.limits?.entries.value ?? DEFAULT_DESTINATION_WALK_LIMIT,
      signal,
    });
    const found = new Map<string, string | undefined>();
    for (const [path, stored] of listedPaths(plan.bundlePath, entries)) {
      found.set(path, stored.kind === "file" ? stored.version : undefined);
    }
    return found;
  } catch (error) {
    if (isStorageError(error, "limit_exceeded") && !signal?.aborted) return undefined;
    throw error;
  }
}

/** Versions of the kept paths, one `stat` each (a bounded number at a time). */
async function statVersions(
  context: ExecuteContext,
  plan: PublishPlan,
  kept: readonly (readonly [string, string])[],
  concurrency: number,
): Promise<Map<string, string | undefined>> {
  const { destination, signal } = context;
  const versions = await mapBounded(kept, concurrency, async ([path]) => {
    try {
      const entry = await destination.stat(joinPrefix(plan.bundlePath, path), { signal });
      return entry.kind === "file" ? entry.version : undefined;
    } catch (error) {
      if (isStorageError(error, "not_found")) return undefined;
      throw error;
    }
  });
  return new Map(kept.map(([path], index) => [path, versions[index]]));
}
