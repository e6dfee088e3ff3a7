import type { StorageBackend } from "@distributor/storage";
import type { PlannedOutput } from "../plan/outputs.js";
import type { LeaseGuard } from "../protocol/lease-guard.js";
import type { DestinationLimits } from "../protocol/limits.js";

// What the executor is given (backends, the lease guard, callbacks) and the errors it reports.

export interface ExecuteContext {
  source: StorageBackend;
  /** Bundle path in the source backend, where the manifest's files live. */
  sourceBundlePath: string;
  destination: StorageBackend;
  signal?: AbortSignal | undefined;
  /** Parallel output writes (default: the destination's `writeConcurrency`, else 4). */
  concurrency?: number | undefined;
  /**
   * The destination's bounds: the state written is no larger than `stateBytes`, a listing no
   * longer than `entries`; default `DEFAULT_DESTINATION_LIMITS`.
   */
  limits?: DestinationLimits | undefined;
  /** The lease held for this bundle path; without one the plan runs unfenced (library use). */
  lease?: LeaseGuard | undefined;
  onOutputWritten?: ((output: PlannedOutput) => void) | undefined;
  /**
   * Called once the state is written, before deleting what it no longer records, with the number
   * of managed outputs to delete (`null` for a forced replacement, which clears every other entry
   * below the bundle path); not called when there is nothing to delete.
   */
  onCleanupStart?: ((deletes: number | null) => void) | undefined;
  /** Called when those deletes have succeeded (a failure throws `PendingDeletesError` instead). */
  onCleanupDone?: (() => void) | undefined;
}

/** A failure while executing a plan; cleanup of this attempt's outputs has already run. */
export class PublishExecutionError extends Error {
  override readonly name = "PublishExecutionError";
}

/** What the write step knows afterwards about the paths it created. */
export interface WriteOutcome {
  /** No-clobber creates that succeeded: path → the version this attempt wrote. */
  created: Map<string, string>;
  /** No-clobber creates whose outcome is unknown (the store may have done them). */
  uncertain: Set<string>;
}
