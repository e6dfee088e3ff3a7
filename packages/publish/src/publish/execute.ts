import type { StateDocument } from "@distributor/state";
import {
  fanOutSignal,
  isStorageError,
  joinPrefix,
  LEASE_FILE_NAME,
  mapBounded,
  STATE_FILE_NAME,
  type StorageBackend,
  statePath,
} from "@distributor/storage";
import { isWriteAction } from "./action.js";
import type { PlannedOutput } from "./outputs.js";
import type { PlannedWrite, PublishPlan } from "./plan.js";
import { encodeStateFile } from "./state-file.js";
import { verifiedChunks, verifyingReader } from "./verify-source.js";

export interface ExecuteContext {
  source: StorageBackend;
  /** Bundle path in the source backend, where the manifest's files live. */
  sourceBundlePath: string;
  destination: StorageBackend;
  signal?: AbortSignal | undefined;
  /** Parallel output writes (default: the destination's `writeConcurrency`, else 4). */
  concurrency?: number | undefined;
  onOutputWritten?: ((output: PlannedOutput) => void) | undefined;
  /**
   * Called once the state is written, before deleting what it no longer records, with the number
   * of managed outputs to delete (`null` for a forced replacement, which clears every other entry
   * below the bundle path); not called when there is nothing to delete.
   */
  onCleanupStart?: ((deletes: number | null) => void) | undefined;
  /** Called when those deletes have succeeded (a failure throws `PendingDeletesError` instead). */
  onCleanupDone?: (() => void) | undefined;
  /**
   * Called just before the state is written; throwing stops the commit (the held lease proves
   * that no other run broke it). Cleanup of this attempt's outputs follows as for any failure.
   */
  beforeStateWrite?: (() => Promise<void>) | undefined;
  /**
   * Asked before cleaning up after a failure: false when this attempt's outputs are no longer
   * its own to remove (another run broke the lease and recovers them).
   */
  mayCleanUp?: (() => Promise<boolean>) | undefined;
}

/**
 * The state changed since planning read it (another writer committed first): nothing of this
 * attempt was committed and its new outputs were removed, so the caller may plan again.
 */
export class StateChangedError extends Error {
  override readonly name = "StateChangedError";
  readonly code = "state_changed";
}

/** A failure while executing a plan; cleanup of this attempt's outputs has already run. */
export class PublishExecutionError extends Error {
  override readonly name = "PublishExecutionError";
}

/**
 * Carries out a write plan in the commit order of SPEC §5: outputs first (source copies streamed
 * and re-verified against the manifest; each write atomic, replacing in place only where the plan
 * allows), then `.distributor.json` (a compare-and-swap against the version planning read), then
 * the deletes of what the new state no longer records. Before the state is written, a failure
 * removes exactly the outputs this attempt created and rethrows; the previous state still
 * describes the destination.
 */
export async function executePublish(context: ExecuteContext, plan: PublishPlan): Promise<void> {
  await executeEncodedPublish(context, plan, undefined);
}

/**
 * `executePublish` with the next state already encoded by `encodeStateFile(…, plan.nextState)`:
 * `publishTarget` encodes it before journaling, so that a state that cannot be written costs the
 * destination not even the journal, and passes the bytes on rather than encoding twice.
 */
export async function executeEncodedPublish(
  context: ExecuteContext,
  plan: PublishPlan,
  encodedState: Uint8Array | undefined,
): Promise<void> {
  if (!isWriteAction(plan.action) || plan.nextState === undefined) {
    if (plan.action.startsWith("skip_")) return;
    throw new PublishExecutionError(`cannot execute action ${plan.action}: ${plan.reason}`);
  }
  const { destination } = context;
  const concurrency = context.concurrency ?? destination.writeConcurrency ?? 4;
  // Every write in flight listens to the signal: give them their own, as wide as the pool.
  const scope = fanOutSignal(context.signal, concurrency);
  try {
    const writable = plan as PublishPlan & { nextState: StateDocument };
    await executeWrites({ ...context, signal: scope.signal }, writable, concurrency, encodedState);
  } finally {
    scope.dispose();
  }
}

async function executeWrites(
  context: ExecuteContext,
  plan: PublishPlan & { nextState: StateDocument },
  concurrency: number,
  encodedState: Uint8Array | undefined,
): Promise<void> {
  const { destination, signal } = context;
  const bundlePath = plan.bundlePath;
  const deleteOptions = { ignoreMissing: true, pruneEmptyDirs: true, signal };

  // Validated and size-checked before the first delete or write: a state that could not be
  // written, or not read back, must not cost the destination anything.
  const state = encodedState ?? encodeStateFile(destination, statePath(bundlePath), plan.nextState);
  const created: string[] = [];
  try {
    if (plan.deletesFirst.length > 0) {
      await destination.deleteManagedOutputs(bundlePath, plan.deletesFirst, deleteOptions);
    }
    await mapBounded(plan.writes, concurrency, async (write) => {
      await writeOutput(context, bundlePath, write);
      if (!write.overwrite) created.push(write.output.path);
      context.onOutputWritten?.(write.output);
    });
    await context.beforeStateWrite?.();
    await writeState(destination, plan, state, signal);
  } catch (error) {
    if ((await context.mayCleanUp?.()) === false) throw error;
    if (!(await removeCreated(destination, bundlePath, created))) {
      throw new CleanupIncompleteError(
        `${(error as Error).message}; removing what this attempt created failed too, the next run removes it`,
        created,
        { cause: error },
      );
    }
    throw error;
  }

  const cleaning = plan.clearBundlePath || plan.deletes.length > 0;
  if (cleaning) context.onCleanupStart?.(plan.clearBundlePath ? null : plan.deletes.length);
  try {
    if (plan.clearBundlePath) {
      const keep = [...plan.outputs.map((output) => output.path), STATE_FILE_NAME, LEASE_FILE_NAME];
      await destination.deletePrefix(bundlePath, { ...deleteOptions, keep });
    } else if (plan.deletes.length > 0) {
      await destination.deleteManagedOutputs(bundlePath, plan.deletes, deleteOptions);
    }
  } catch (error) {
    throw new PendingDeletesError(
      `published, but removing the outputs it replaced failed: ${(error as Error).message}; the next run removes them`,
      plan.clearBundlePath ? [] : plan.deletes,
      { cause: error },
    );
  }
  if (cleaning) context.onCleanupDone?.();
}

/**
 * The new state is written but deleting what it no longer records failed: the publication
 * stands, and `pending` (bundle-relative) must stay journaled so the next run removes them.
 */
export class PendingDeletesError extends Error {
  override readonly name = "PendingDeletesError";
  readonly code = "delete_failed";
  readonly pending: readonly string[];

  constructor(message: string, pending: readonly string[], options?: { cause?: unknown }) {
    super(message, options);
    this.pending = pending;
  }
}

/** Writes the next state only while the state is still the version planning read. */
async function writeState(
  destination: StorageBackend,
  plan: PublishPlan,
  state: Uint8Array,
  signal: AbortSignal | undefined,
): Promise<void> {
  const target = statePath(plan.bundlePath);
  const options = { contentType: "application/json", signal };
  try {
    if (plan.stateVersion === undefined) {
      // No state when planning: a state that appeared since belongs to someone else.
      await destination.writeFile(target, state, { ...options, overwrite: false });
    } else {
      await destination.writeFile(target, state, { ...options, ifMatch: plan.stateVersion });
    }
  } catch (error) {
    if (isStorageError(error, "conflict") || isStorageError(error, "already_exists")) {
      throw new StateChangedError(
        `${destination.location} ${statePath(plan.bundlePath)} changed since it was planned from; nothing was committed`,
        { cause: error },
      );
    }
    throw error;
  }
}

/** Removes what this attempt created; false when that failed (the journal then keeps them). */
async function removeCreated(
  destination: StorageBackend,
  bundlePath: string,
  created: readonly string[],
): Promise<boolean> {
  if (created.length === 0) return true;
  try {
    await destination.deleteManagedOutputs(bundlePath, created, {
      ignoreMissing: true,
      pruneEmptyDirs: true,
    });
    return true;
  } catch {
    return false;
  }
}

/**
 * A failure before the state write whose cleanup failed as well: `pending` (bundle-relative) may
 * still exist, recorded by no state, and must stay journaled for the next run to remove.
 */
export class CleanupIncompleteError extends Error {
  override readonly name = "CleanupIncompleteError";
  readonly pending: readonly string[];

  constructor(message: string, pending: readonly string[], options?: { cause?: unknown }) {
    super(message, options);
    this.pending = pending;
  }
}

async function writeOutput(
  context: ExecuteContext,
  bundlePath: string,
  write: PlannedWrite,
): Promise<void> {
  const { output, overwrite } = write;
  const target = joinPrefix(bundlePath, output.path);
  const options = {
    overwrite,
    size: output.size,
    sha256: output.sha256,
    signal: context.signal,
  };
  if (output.kind === "generated") {
    if (output.content === undefined) {
      throw new PublishExecutionError(`generated output ${output.path} has no rendered content`);
    }
    await context.destination.writeFile(target, output.content, options);
    return;
  }
  const sourcePath = joinPrefix(context.sourceBundlePath, output.sourcePath);
  const expected = { path: output.sourcePath, sha256: output.sha256, size: output.size };
  const { source, signal } = context;
  if (source.openReader !== undefined) {
    const reader = await source.openReader(sourcePath, { signal });
    try {
      await context.destination.writeFile(target, verifyingReader(reader, expected), options);
    } finally {
      // Writes close their reader; this covers a destination that failed before taking it.
      reader.close();
    }
    return;
  }
  const readable = await source.openRead(sourcePath, { signal });
  try {
    await context.destination.writeFile(target, verifiedChunks(readable, expected), options);
  } finally {
    readable.destroy();
  }
}
