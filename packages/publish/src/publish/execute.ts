import {
  formatOwnerScope,
  mergeOutputRecords,
  mergeOwnerOutputs,
  newSharedRootState,
  type OutputProjection,
  type OwnerRecord,
  projectOutputs,
  projectOwnerOutputs,
  replaceOwnerOutputs,
  type SharedRootState,
  type SingleOwnerState,
  serializeSharedRootState,
  serializeSingleOwnerState,
  singleOwnerAsOwnerOutputs,
  singleOwnerAsOwnerRecord,
  truncateToSecond,
} from "@distributor/state";
import { displayPath, joinPrefix, type StorageBackend, statePath } from "@distributor/storage";
import { isWriteAction } from "./action.js";
import type { PlannedOutput } from "./outputs.js";
import { isManagedByOwner, type PublishPlan } from "./plan.js";
import { mapPool } from "./pool.js";
import { VerifyingStream } from "./verify-stream.js";

export interface ExecuteContext {
  source: StorageBackend;
  /** Bundle path in the source backend, where the manifest's files live. */
  sourceBundlePath: string;
  destination: StorageBackend;
  distributorVersion?: string | undefined;
  /** Clock for state timestamps (truncated to whole seconds). */
  now?: (() => Date) | undefined;
  signal?: AbortSignal | undefined;
  /** Parallel output writes (default 4). */
  concurrency?: number | undefined;
  onOutputWritten?: ((output: PlannedOutput) => void) | undefined;
}

/** A failure while executing a plan; cleanup of this attempt's outputs has already run. */
export class PublishExecutionError extends Error {
  override readonly name = "PublishExecutionError";
}

/**
 * Carries out a write plan: deletes what the plan replaces, writes every output (source copies
 * streamed and re-verified against the manifest), and writes `.distributor.json` last. On a
 * failure it removes the outputs this attempt created and rethrows.
 */
export async function executePublish(context: ExecuteContext, plan: PublishPlan): Promise<void> {
  if (!isWriteAction(plan.action)) {
    if (plan.action.startsWith("skip_")) return;
    throw new PublishExecutionError(`cannot execute action ${plan.action}: ${plan.reason}`);
  }
  const { destination, signal } = context;
  const bundlePath = plan.bundlePath;
  const deleteOptions = { ignoreMissing: true, pruneEmptyDirs: true, signal };

  if (plan.action === "force_replace") {
    await destination.deletePrefix(bundlePath, deleteOptions);
    await ensureEmpty(destination, bundlePath, signal);
  } else if (plan.action === "replace_older" && plan.reconciliation === "replace") {
    if (plan.stateMode === "single_owner" && plan.existingState !== undefined) {
      await destination.deleteManagedBundle(
        bundlePath,
        plan.existingState.outputs.map((output) => output.path),
        deleteOptions,
      );
      await ensureEmpty(destination, bundlePath, signal);
    } else if (plan.ownerOutputsToDelete.length > 0) {
      await destination.deleteManagedOutputs(
        bundlePath,
        plan.ownerOutputsToDelete.map((output) => output.path),
        deleteOptions,
      );
    }
  }

  // Paths this attempt may overwrite in place: outputs this owner already manages, unless the
  // deletes above removed them all (forced or single-owner replacement).
  const clearedFirst =
    plan.action === "force_replace" ||
    (plan.action === "replace_older" &&
      plan.reconciliation === "replace" &&
      plan.stateMode === "single_owner");
  const overwrites = new Set(
    clearedFirst
      ? []
      : plan.outputs.map((o) => o.path).filter((path) => isManagedByOwner(plan, path)),
  );
  const written: string[] = [];
  const cleanup = async () => {
    // Merge keeps overwritten managed outputs: they belonged to the managed set before.
    const created =
      plan.reconciliation === "merge" ? written.filter((path) => !overwrites.has(path)) : written;
    try {
      await destination.deleteManagedOutputs(bundlePath, created, {
        ignoreMissing: true,
        pruneEmptyDirs: true,
      });
    } catch {
      // The original failure is what the operator needs to see; the destination must be
      // inspected before a retry either way.
    }
  };

  try {
    await mapPool(plan.outputs, context.concurrency ?? 4, async (output) => {
      await writeOutput(context, bundlePath, output, overwrites.has(output.path));
      written.push(output.path);
      context.onOutputWritten?.(output);
    });
    const now = truncateToSecond(context.now?.() ?? new Date());
    const text =
      plan.stateMode === "shared_root"
        ? serializeSharedRootState(nextSharedRootState(plan, now, context.distributorVersion))
        : serializeSingleOwnerState(nextSingleOwnerState(plan, now, context.distributorVersion));
    await destination.writeFile(statePath(bundlePath), text, {
      overwrite: true,
      contentType: "application/json",
      signal,
    });
  } catch (error) {
    await cleanup();
    throw error;
  }
}

async function ensureEmpty(backend: StorageBackend, bundlePath: string, signal?: AbortSignal) {
  if (await backend.hasAny(bundlePath, { signal })) {
    throw new PublishExecutionError(
      `destination bundle path ${displayPath(bundlePath)} is not empty after removing managed outputs`,
    );
  }
}

async function writeOutput(
  context: ExecuteContext,
  bundlePath: string,
  output: PlannedOutput,
  overwrite: boolean,
): Promise<void> {
  const target = joinPrefix(bundlePath, output.path);
  const options = { overwrite, signal: context.signal };
  if (output.kind === "generated") {
    if (output.content === undefined) {
      throw new PublishExecutionError(`generated output ${output.path} has no rendered content`);
    }
    await context.destination.writeFile(target, output.content, options);
    return;
  }
  const readable = await context.source.openRead(
    joinPrefix(context.sourceBundlePath, output.sourcePath),
    { signal: context.signal },
  );
  const verifier = new VerifyingStream(output.sourcePath, output.sha256, output.size);
  readable.on("error", (error) => verifier.destroy(error));
  try {
    await context.destination.writeFile(target, readable.pipe(verifier), options);
  } finally {
    readable.destroy();
  }
}

function projections(outputs: readonly PlannedOutput[]): OutputProjection[] {
  return outputs.map((output) => {
    const projection: OutputProjection = {
      path: output.path,
      kind: output.kind,
      sourcePath: output.sourcePath,
      sha256: output.sha256,
      size: output.size,
    };
    if (output.transform !== undefined) projection.transform = output.transform;
    if (output.url !== undefined) projection.url = output.url;
    return projection;
  });
}

function nextSingleOwnerState(
  plan: PublishPlan,
  now: Date,
  distributorVersion: string | undefined,
): SingleOwnerState {
  const previous = isSameOwnerState(plan) ? plan.existingState : undefined;
  const planned = projectOutputs(projections(plan.outputs), previous?.outputs ?? [], now);
  const merging = plan.action === "replace_older" && plan.reconciliation === "merge";
  const next: SingleOwnerState = {
    schemaVersion: 2,
    pipelineId: plan.ownerScope.pipelineId,
    destinationId: plan.ownerScope.destinationId,
    publishedAt: now,
    createdAt: previous?.createdAt ?? now,
    updatedAt: now,
    state: { mode: "single_owner" },
    reconciliation: { mode: plan.reconciliation },
    source: { manifest: plan.manifest },
    outputs:
      merging && previous !== undefined ? mergeOutputRecords(previous.outputs, planned) : planned,
  };
  if (distributorVersion) next.distributorVersion = distributorVersion;
  if (plan.primaryUrl !== undefined) next.links = { primaryUrl: plan.primaryUrl };
  return next;
}

function isSameOwnerState(plan: PublishPlan): boolean {
  const state = plan.existingState;
  return (
    state !== undefined &&
    state.pipelineId === plan.ownerScope.pipelineId &&
    state.destinationId === plan.ownerScope.destinationId
  );
}

function nextSharedRootState(
  plan: PublishPlan,
  now: Date,
  distributorVersion: string | undefined,
): SharedRootState {
  const base = sharedRootBase(plan, now, distributorVersion);
  const owner: OwnerRecord = {
    scope: { ...plan.ownerScope },
    reconciliation: { mode: plan.reconciliation },
    source: { manifest: plan.manifest },
  };
  if (plan.primaryUrl !== undefined) owner.links = { primaryUrl: plan.primaryUrl };
  const existing = plan.action === "force_replace" ? [] : plan.currentOwnerOutputs;
  const planned = projectOwnerOutputs(
    projections(plan.outputs),
    existing,
    owner.scope,
    plan.manifest,
    now,
  );
  const merging = plan.action === "replace_older" && plan.reconciliation === "merge";
  return merging
    ? mergeOwnerOutputs(base, owner, planned)
    : replaceOwnerOutputs(base, owner, planned);
}

function sharedRootBase(
  plan: PublishPlan,
  now: Date,
  distributorVersion: string | undefined,
): SharedRootState {
  const fresh = newSharedRootState(now, distributorVersion);
  if (plan.action === "force_replace") return fresh;
  if (plan.existingSharedRoot !== undefined) {
    const base: SharedRootState = { ...plan.existingSharedRoot, updatedAt: now };
    delete base.distributorVersion;
    if (distributorVersion) base.distributorVersion = distributorVersion;
    return base;
  }
  if (plan.existingState !== undefined && isSameOwnerState(plan)) {
    // Migration: compatible single-owner state becomes this owner's record in a shared root, so
    // merge keeps its omitted outputs managed.
    return {
      ...fresh,
      createdAt: plan.existingState.createdAt,
      owners: [singleOwnerAsOwnerRecord(plan.existingState)],
      outputs: singleOwnerAsOwnerOutputs(plan.existingState),
    };
  }
  if (plan.existingState !== undefined) {
    throw new PublishExecutionError(
      `destination state belongs to ${formatOwnerScope({ pipelineId: plan.existingState.pipelineId, destinationId: plan.existingState.destinationId })}, not ${formatOwnerScope(plan.ownerScope)}`,
    );
  }
  return fresh;
}
