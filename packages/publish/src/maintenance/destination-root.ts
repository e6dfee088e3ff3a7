import type { DestinationLimits, Lease } from "@distributor/engine";
import {
  compareAndSwapState,
  encodeStateFile,
  holdLease,
  isStateFile,
  PendingDeletesError,
  readStateFile,
  StateChangedError,
  UncommittedError,
  walkWithin,
} from "@distributor/engine";
import type { OwnerScope, StateDocument } from "@distributor/state";
import {
  compareLogicalPaths,
  isStorageError,
  locatePath,
  parentPath,
  STATE_FILE_NAME,
  type StorageBackend,
} from "@distributor/storage";
import type { DestinationConfig } from "../config/types.js";
import { WorkflowError } from "../errors.js";

/**
 * The configured root of a destination as reports show it (`root_path`): the local or SSH
 * directory, or the S3 prefix; `.` when the root is the backend's own root.
 */
export function destinationRootPath(destination: DestinationConfig): string {
  const location = destination.location;
  const root = location.backend === "s3" ? location.prefix : location.path;
  return root === "" ? "." : root;
}

/** An owner scope as maintenance reports print it. */
export function scopeReport(scope: OwnerScope): { pipeline_id: string; destination_id: string } {
  return { pipeline_id: scope.pipelineId, destination_id: scope.destinationId };
}

/**
 * Reads and parses the `.distributor.json` at the root of a destination. A missing file fails
 * with `state_not_found` (there is nothing managed to maintain), unparseable text with
 * `state_invalid`, a file larger than the destination's `max_state_size` with
 * `storage_limit_exceeded`; the file itself is never touched.
 */
export async function readRootState(
  backend: StorageBackend,
  signal: AbortSignal | undefined,
  limits: DestinationLimits,
): Promise<{ document: StateDocument; version: string }> {
  try {
    const { document, version } = await readStateFile(
      backend,
      STATE_FILE_NAME,
      signal,
      limits.stateBytes,
    );
    return { document, version };
  } catch (error) {
    if (isStorageError(error, "not_found")) {
      const below = await statesBelowRoot(backend, signal, limits);
      const detail =
        below.length === 0
          ? "so nothing is managed there"
          : `but ${below.length} bundle path(s) below it keep their own (${below.slice(0, 3).join(", ")}${below.length > 3 ? ", …" : ""}), as a preserve_relative destination does: this command maintains a root state only; \`audit\` checks every bundle path's outputs, \`run --repair\` restores them, and \`prune\` removes whole bundle paths`;
      throw new WorkflowError(
        "state_not_found",
        `${backend.location}: no ${STATE_FILE_NAME} at the destination root, ${detail}`,
        { cause: error },
      );
    }
    throw error;
  }
}

/** Bundle paths below the root with a state file of their own (a bounded look). */
async function statesBelowRoot(
  backend: StorageBackend,
  signal: AbortSignal | undefined,
  limits: DestinationLimits,
): Promise<string[]> {
  try {
    const entries = await walkWithin(backend, "", limits.entries, { recursive: true, signal });
    return entries
      .filter(
        (entry) =>
          entry.kind === "file" && isStateFile(entry.path) && entry.path !== STATE_FILE_NAME,
      )
      .map((entry) => parentPath(entry.path))
      .sort(compareLogicalPaths);
  } catch (error) {
    if (signal?.aborted) throw error;
    return [];
  }
}

/**
 * Replaces the root `.distributor.json` with `document` while it is still the version read
 * (atomic compare-and-swap, resolved by reading back when its answer is lost). Serialising
 * validates, so invalid state is refused before anything is written; a state changed meanwhile
 * fails with `state_changed` and is left as it is.
 */
export async function writeRootState(
  backend: StorageBackend,
  document: StateDocument,
  version: string,
  signal: AbortSignal | undefined,
  limits: DestinationLimits,
): Promise<void> {
  const state = encodeStateFile(backend, STATE_FILE_NAME, document, limits.stateBytes);
  try {
    await compareAndSwapState(backend, STATE_FILE_NAME, state, version, signal);
  } catch (error) {
    if (!(error instanceof StateChangedError)) throw error;
    throw new StateChangedError(
      `${locatePath(backend.location, STATE_FILE_NAME)} changed while it was being maintained; nothing was written`,
      { cause: error },
    );
  }
}

/** What maintenance commands accept about the lease they take (docs/design/commit-protocol.md). */
export interface MaintenanceLeaseOptions {
  /** How long to wait for another run's live lease (default 0: fail at once). */
  lockTimeoutMs?: number;
  signal?: AbortSignal;
  /** Lease lifetime and renewal (tests shorten it). */
  lease?: { ttlMs?: number; renew?: boolean; now?: () => Date };
  /** The destination's `max_state_size` and `max_entries`, for the recovery taking the lease may run. */
  limits: DestinationLimits;
}

/** The lease options of a maintenance command's own options, at a destination with `limits`. */
export function maintenanceLease(
  options: {
    lockTimeoutMs?: number | undefined;
    signal?: AbortSignal | undefined;
    now?: (() => Date) | undefined;
    lease?: { ttlMs?: number; renew?: boolean } | undefined;
  },
  limits: DestinationLimits,
): MaintenanceLeaseOptions {
  return {
    limits,
    ...(options.lockTimeoutMs === undefined ? {} : { lockTimeoutMs: options.lockTimeoutMs }),
    ...(options.signal === undefined ? {} : { signal: options.signal }),
    lease: { ...options.lease, ...(options.now === undefined ? {} : { now: options.now }) },
  };
}

/**
 * Runs `work` holding the lease of the destination root's state, recovering a stale lease
 * first; a dry run reads without one (`work` gets undefined). `work` journals what it will
 * delete, confirms the lease before its state write and fences its deletes (docs/design/commit-protocol.md). When it
 * fails with an `UncommittedError` or a `PendingDeletesError`, the lease is abandoned with their
 * pending paths, so the next run completes the work; otherwise it is released.
 */
export function withRootLease<Result>(
  backend: StorageBackend,
  owner: OwnerScope,
  dryRun: boolean,
  options: MaintenanceLeaseOptions,
  work: (lease: Lease | undefined) => Promise<Result>,
): Promise<Result> {
  if (dryRun) return work(undefined);
  return withBundleLease(backend, "", owner, options, work);
}

/** What a `withBundleLease` body tells about how to let the lease go. */
export interface LeaseRelease {
  /** The bundle path's state is gone: remove the directories its lease leaves empty. */
  emptied: boolean;
}

/**
 * Runs `work` holding the lease of the state at `bundlePath` (as `withRootLease` does for the
 * root). When `work` sets `release.emptied`, the directories left empty by removing the lease
 * go with it.
 */
export async function withBundleLease<Result>(
  backend: StorageBackend,
  bundlePath: string,
  owner: OwnerScope,
  options: MaintenanceLeaseOptions,
  work: (lease: Lease, release: LeaseRelease) => Promise<Result>,
): Promise<Result> {
  const lease = await holdLease(backend, bundlePath, owner, {
    lockTimeoutMs: options.lockTimeoutMs,
    signal: options.signal,
    limits: options.limits,
    ...options.lease,
  });
  const release: LeaseRelease = { emptied: false };
  let keep: readonly string[] | undefined;
  try {
    return await work(lease, release);
  } catch (error) {
    const pending = pendingOf(error);
    if (pending !== undefined) keep = pending;
    throw error;
  } finally {
    if (keep === undefined) await lease.release({ pruneEmptyDirs: release.emptied });
    else await lease.abandon(keep);
  }
}

/** The paths a failure leaves for the next run to remove, if it is one that does. */
function pendingOf(error: unknown): readonly string[] | undefined {
  for (let current = error; current instanceof Error; current = current.cause) {
    if (current instanceof UncommittedError || current instanceof PendingDeletesError) {
      return current.pending;
    }
  }
  return undefined;
}
