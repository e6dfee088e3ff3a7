// The bundle states a prune across bundle paths considers, and the retention ranking over them.
import {
  type DestinationLimits,
  type DestinationStateRead,
  readStateFile,
} from "@distributor/engine";
import {
  findOwner,
  formatStateTimestamp,
  isSharedRootState,
  type OwnerScope,
  type StateDocument,
  sameOwnerScope,
} from "@distributor/state";
import {
  compareLogicalPaths,
  displayPath,
  isStorageError,
  joinPrefix,
  locatePath,
  type StorageBackend,
  statePath,
} from "@distributor/storage";
import type { PrunePolicy } from "../../config/types.js";
import { errorCode, errorMessage, WorkflowError } from "../../errors.js";
import { ownedRecords } from "../../shared/selection.js";
import type { PruneBundleRecord, PruneOutputRecord } from "./types.js";

/** One owned bundle state as planning read it. */
export interface BundleCandidate {
  bundlePath: string;
  document: StateDocument;
  /** The owner's output records (bundle-relative paths). */
  outputs: readonly { path: string; updatedAt: Date }[];
  publishedAt: Date | undefined;
  sourceId: string;
  /** The published source manifest's `created`: what retention ranks and ages bundles by. */
  sourceCreated: Date;
  /** No other owner is listed or records outputs: pruning the bundle removes the state file. */
  removesState: boolean;
}

/**
 * Which bundle paths a retention policy prunes (pure). Bundles are ranked by content time, the
 * `created` of the source manifest their state records, newest first, ties to the bundle path in
 * ascending order (as a `fixed` destination picks the newest bundle). Not by publication time: a
 * bundle pruned while its source still holds it is published again by the next run, and ranking
 * it by that fresh publication would prune the really newest bundles next. The `keep_latest`
 * newest are preserved, then those whose `created` is older than `older_than` are pruned (all
 * the rest when only `keep_latest` is set). The newest bundle, the publication in force, is
 * always preserved (`keep_latest: 0` cannot empty an archive). A bundle state in which the owner records no output
 * any more (what an interrupted prune leaves) holds nothing to keep: it is always pruned and does
 * not count towards `keep_latest`. Pruned bundles come oldest first (the order they go in),
 * preserved ones newest first.
 */
export function planBundlePrune(
  candidates: readonly BundleCandidate[],
  policy: PrunePolicy,
  now: Date,
): { pruned: BundleCandidate[]; preserved: BundleCandidate[] } {
  const active =
    policy.enabled && (policy.olderThanMs !== undefined || policy.keepLatest !== undefined);
  const ranked = candidates.filter((c) => c.outputs.length > 0).sort(newestFirst);
  if (!active) return { pruned: [], preserved: ranked };
  const empty = candidates.filter((c) => !ranked.includes(c));
  const keep = Math.max(0, Math.floor(policy.keepLatest ?? 0));
  const cutoff = policy.olderThanMs === undefined ? undefined : now.getTime() - policy.olderThanMs;
  const pruned: BundleCandidate[] = [];
  const preserved: BundleCandidate[] = [];
  ranked.forEach((candidate, index) => {
    const young = cutoff !== undefined && candidate.sourceCreated.getTime() >= cutoff;
    // The newest bundle is the publication in force: never pruned, whatever the policy.
    if (index === 0 || index < keep || young) preserved.push(candidate);
    else pruned.push(candidate);
  });
  return { pruned: [...empty, ...pruned.reverse()], preserved };
}

function newestFirst(a: BundleCandidate, b: BundleCandidate): number {
  return (
    b.sourceCreated.getTime() - a.sourceCreated.getTime() ||
    compareLogicalPaths(a.bundlePath, b.bundlePath)
  );
}

/**
 * The same owner's publication: nobody published there since it was planned (same source id,
 * manifest `created` and publication time). Outputs recorded or dropped since (adopted, repaired,
 * reconciled) do not make it another publication.
 */
export function samePublication(current: BundleCandidate, planned: BundleCandidate): boolean {
  return (
    current.sourceId === planned.sourceId &&
    current.sourceCreated.getTime() === planned.sourceCreated.getTime() &&
    current.publishedAt?.getTime() === planned.publishedAt?.getTime()
  );
}

/**
 * The bundle state at `bundlePath` when it records `owner`; undefined when it belongs to others.
 * An unreadable or invalid state fails the prune before anything is deleted: its owner and age
 * cannot be known, so neither can the ranking.
 */
export async function readCandidate(
  backend: StorageBackend,
  bundlePath: string,
  owner: OwnerScope,
  signal: AbortSignal | undefined,
  limits: DestinationLimits,
): Promise<BundleCandidate | undefined> {
  let document: StateDocument;
  try {
    ({ document } = await readStateFile(backend, statePath(bundlePath), signal, limits.stateBytes));
  } catch (error) {
    if (isStorageError(error, "not_found")) return undefined;
    throw unreadableState(backend, bundlePath, error);
  }
  return ownedCandidate(bundlePath, document, owner);
}

/** `readCandidate` of the state a transaction read under the bundle path's lease (`tx.read`). */
export function candidateOf(
  backend: StorageBackend,
  bundlePath: string,
  read: DestinationStateRead,
  owner: OwnerScope,
): BundleCandidate | undefined {
  const { status } = read;
  if (status.stateError !== undefined)
    throw unreadableState(backend, bundlePath, status.stateError);
  return status.state === undefined ? undefined : ownedCandidate(bundlePath, status.state, owner);
}

/** What a state that cannot be read fails the prune with. */
function unreadableState(backend: StorageBackend, bundlePath: string, error: unknown): unknown {
  const code = errorCode(error);
  if (code === "storage_limit_exceeded") {
    // Larger than `max_state_size`: the message says which setting to raise.
    return new WorkflowError("state_invalid", `${errorMessage(error)}; nothing was pruned`, {
      cause: error,
    });
  }
  if (code !== "state_invalid") return error;
  return new WorkflowError(
    "state_invalid",
    `${locatePath(backend.location, statePath(bundlePath))} cannot be read as state (${errorMessage(error)}); nothing was pruned (reconcile-state --rebuild replaces it while its source still publishes there)`,
    { cause: error },
  );
}

/** The candidate a bundle state is for `owner`; undefined when it records others only. */
function ownedCandidate(
  bundlePath: string,
  document: StateDocument,
  owner: OwnerScope,
): BundleCandidate | undefined {
  const records = ownedRecords(document, owner);
  if (records === undefined) return undefined;
  const outputs = (document.outputs as readonly { path: string; updatedAt: Date }[]).filter(
    (output) => records.some((record) => record.path === output.path),
  );
  if (isSharedRootState(document)) {
    const newest = outputs.reduce<Date | undefined>(
      (latest, output) =>
        latest === undefined || output.updatedAt.getTime() > latest.getTime()
          ? output.updatedAt
          : latest,
      undefined,
    );
    const others =
      document.owners.some((o) => !sameOwnerScope(o.scope, owner)) ||
      document.outputs.some((o) => !sameOwnerScope(o.owner, owner));
    return {
      bundlePath,
      document,
      outputs,
      publishedAt: newest,
      sourceId: findOwner(document, owner)?.source.manifest.id ?? "",
      sourceCreated: findOwner(document, owner)?.source.manifest.created ?? new Date(0),
      removesState: !others,
    };
  }
  return {
    bundlePath,
    document,
    outputs,
    publishedAt: document.publishedAt,
    sourceId: document.source.manifest.id,
    sourceCreated: document.source.manifest.created,
    removesState: true,
  };
}

export function bundleRecord(candidate: BundleCandidate): PruneBundleRecord {
  return {
    bundle_path: displayPath(candidate.bundlePath),
    published_at:
      candidate.publishedAt === undefined ? null : formatStateTimestamp(candidate.publishedAt),
    source_id: candidate.sourceId,
    created: formatStateTimestamp(candidate.sourceCreated),
    output_count: candidate.outputs.length,
    removes_state: candidate.removesState,
  };
}

/** The owner's outputs of a bundle, with paths relative to the destination root. */
export function outputRecords(candidate: BundleCandidate): PruneOutputRecord[] {
  return candidate.outputs.map((output) => ({
    path: joinPrefix(candidate.bundlePath, output.path),
    updated_at: formatStateTimestamp(output.updatedAt),
  }));
}
