import {
  type DestinationLimits,
  type DestinationStateRead,
  isStateFile,
  type LeaseOptions,
  StateChangedError,
  type StateTransaction,
  type StateTransactionOptions,
  walkWithin,
} from "@distributor/engine";
import type { OwnerScope, StateDocument } from "@distributor/state";
import {
  compareLogicalPaths,
  joinPrefix,
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
 * The `.distributor.json` at the root of a destination as a transaction read it (`tx.read`). A
 * missing file fails with `state_not_found` (there is nothing managed to maintain), unparseable
 * text with `state_invalid`, a file larger than the destination's `max_state_size` with
 * `storage_limit_exceeded`; the file itself is never touched.
 */
export async function rootStateOf(
  backend: StorageBackend,
  read: DestinationStateRead,
  signal: AbortSignal | undefined,
  limits: DestinationLimits,
  /** What to do instead when bundle paths below keep states of their own; `first` names one. */
  instead: (first: string) => string = () =>
    "this command maintains a root state only; `audit` checks every bundle path's outputs, `run --repair` restores them, and `prune` removes whole bundle paths",
): Promise<StateDocument> {
  const { status } = read;
  if (status.stateError !== undefined) throw status.stateError;
  if (status.state !== undefined) return status.state;
  const below = await statesBelowRoot(backend, signal, limits);
  const detail =
    below.length === 0
      ? "so nothing is managed there"
      : `but ${below.length} bundle path(s) below it keep their own (${below.slice(0, 3).join(", ")}${below.length > 3 ? ", …" : ""}), as a preserve_relative destination does: ${instead(below[0] as string)}`;
  throw new WorkflowError(
    "state_not_found",
    `${backend.location}: no ${STATE_FILE_NAME} at the destination root, ${detail}`,
  );
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
 * Commits `document` as the root `.distributor.json` through `tx`: a compare-and-swap on the
 * version read, so a state changed meanwhile fails with `state_changed` and is left as it is.
 * Encoding validates, so invalid state is refused before anything is written.
 */
export async function commitRootState(
  backend: StorageBackend,
  tx: StateTransaction,
  document: StateDocument,
  /** The bundle path whose state it is; default the destination root. */
  bundlePath = "",
): Promise<void> {
  try {
    await tx.commit(document);
  } catch (error) {
    if (!(error instanceof StateChangedError)) throw error;
    throw new StateChangedError(
      `${locatePath(backend.location, joinPrefix(bundlePath, STATE_FILE_NAME))} changed while it was being maintained; nothing was written`,
      { cause: error },
    );
  }
}

/**
 * The state transaction options (docs/design/commit-protocol.md) of a maintenance command's own
 * options, at a destination with `limits`: how long to wait for another run's lease (default 0:
 * fail at once), the lease's lifetime and renewal (tests shorten it), the bounds the state is
 * read and written within and the recovery taking the lease lists within.
 */
export function maintenanceTransaction(
  options: {
    lockTimeoutMs?: number | undefined;
    signal?: AbortSignal | undefined;
    now?: (() => Date) | undefined;
    lease?: { ttlMs?: number; renew?: boolean } | undefined;
  },
  limits: DestinationLimits,
  dryRun = false,
): StateTransactionOptions & { lease: LeaseOptions } {
  return {
    dryRun,
    limits,
    ...(options.signal === undefined ? {} : { signal: options.signal }),
    lease: {
      ...options.lease,
      ...(options.lockTimeoutMs === undefined ? {} : { lockTimeoutMs: options.lockTimeoutMs }),
      ...(options.now === undefined ? {} : { now: options.now }),
    },
  };
}
