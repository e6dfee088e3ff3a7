import { compareLogicalPaths } from "@distributor/storage";
import { StateError } from "./errors.js";
import { assertSingleOwnerScope, sameOwnerScope } from "./scope.js";
import {
  isSharedRootState,
  type OwnerScope,
  type SharedRootState,
  type SingleOwnerState,
  type StateDocument,
} from "./types.js";

/** A managed output that a retention policy may delete. */
export interface PruneCandidate {
  path: string;
  /** The output's `updated_at`: retention measures age from the last write. */
  updatedAt: Date;
  /** Set for shared-root candidates. */
  owner?: OwnerScope;
}

export interface PrunePlanOptions {
  /** Reference time for `olderThanMs`; required when it is set (the planner reads no clock). */
  now?: Date;
  /** Prune candidates whose `updatedAt` is strictly before `now - olderThanMs`. */
  olderThanMs?: number;
  /** Always preserve this many newest candidates, before the age check. Negative means 0. */
  keepLatest?: number;
}

export interface PrunePlan {
  /** Oldest first (ties by path in byte order): the order to delete in. */
  pruned: PruneCandidate[];
  /** Newest first (ties by path in byte order). */
  preserved: PruneCandidate[];
}

/** Every output of single-owner state is a candidate. */
export function singleOwnerPruneCandidates(state: SingleOwnerState): PruneCandidate[] {
  return state.outputs.map((output) => ({
    path: output.path,
    updatedAt: new Date(output.updatedAt),
  }));
}

/** Only `scope`'s outputs are candidates; other owners' outputs are never offered. */
export function sharedRootPruneCandidates(
  state: SharedRootState,
  scope: OwnerScope,
): PruneCandidate[] {
  return state.outputs
    .filter((output) => sameOwnerScope(output.owner, scope))
    .map((output) => ({
      path: output.path,
      updatedAt: new Date(output.updatedAt),
      owner: { ...output.owner },
    }));
}

/**
 * Candidates of either document for `scope`. Single-owner state written for another pipeline or
 * destination is refused: `state owner is A/B, not C/D`.
 */
export function pruneCandidatesForDocument(
  document: StateDocument,
  scope: OwnerScope,
): PruneCandidate[] {
  if (isSharedRootState(document)) return sharedRootPruneCandidates(document, scope);
  assertSingleOwnerScope(document, scope);
  return singleOwnerPruneCandidates(document);
}

/**
 * Splits candidates into pruned and preserved. With neither `olderThanMs` nor `keepLatest` the
 * policy selects nothing. Otherwise the `keepLatest` newest are preserved first; of the rest,
 * those older than the cutoff are pruned (all of them when only `keepLatest` is set).
 */
export function planPrune(
  candidates: readonly PruneCandidate[],
  options: PrunePlanOptions = {},
): PrunePlan {
  const ordered = [...candidates].sort(newestFirst);
  const { olderThanMs, keepLatest } = options;
  if (olderThanMs === undefined && keepLatest === undefined) {
    return { pruned: [], preserved: ordered };
  }

  const preservedPaths = new Set<string>();
  if (keepLatest !== undefined) {
    if (Number.isNaN(keepLatest)) throw new StateError("prune keep_latest must be a number");
    const keep = Math.min(Math.max(Math.floor(keepLatest), 0), ordered.length);
    for (const candidate of ordered.slice(0, keep)) preservedPaths.add(candidate.path);
  }

  let cutoff: number | undefined;
  if (olderThanMs !== undefined) {
    if (!Number.isFinite(olderThanMs)) {
      throw new StateError("prune older_than must be a finite number of milliseconds");
    }
    if (options.now === undefined || !Number.isFinite(options.now.getTime())) {
      throw new StateError("prune now is required when older_than is set");
    }
    cutoff = options.now.getTime() - olderThanMs;
  }

  const pruned: PruneCandidate[] = [];
  const preserved: PruneCandidate[] = [];
  for (const candidate of ordered) {
    if (preservedPaths.has(candidate.path)) preserved.push(candidate);
    else if (cutoff === undefined || candidate.updatedAt.getTime() < cutoff) pruned.push(candidate);
    else preserved.push(candidate);
  }
  pruned.sort(oldestFirst);
  preserved.sort(newestFirst);
  return { pruned, preserved };
}

// Ties break by path in UTF-8 byte order, as the reference compared Go strings.
function newestFirst(a: PruneCandidate, b: PruneCandidate): number {
  const byTime = b.updatedAt.getTime() - a.updatedAt.getTime();
  return byTime !== 0 ? byTime : compareLogicalPaths(a.path, b.path);
}

function oldestFirst(a: PruneCandidate, b: PruneCandidate): number {
  const byTime = a.updatedAt.getTime() - b.updatedAt.getTime();
  return byTime !== 0 ? byTime : compareLogicalPaths(a.path, b.path);
}
