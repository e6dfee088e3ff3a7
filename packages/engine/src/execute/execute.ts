import { randomUUID } from "node:crypto";
import { setMaxListeners } from "node:events";
import {
  replacementMarker,
  type StateDocument,
  truncateToSecond,
  withReplacementMarker,
} from "@distributor/state";
import {
  fanOutSignal,
  isStorageError,
  joinPrefix,
  mapBounded,
  statePath,
} from "@distributor/storage";
import { isWriteAction } from "../plan/action.js";
import type { PlannedWrite, PublishPlan } from "../plan/plan-types.js";
import { writePhases } from "../plan/write-order.js";
import {
  AmbiguousCommitError,
  compareAndSwapState,
  StateChangedError,
} from "../protocol/commit-state.js";
import { PendingDeletesError, UncommittedError } from "../protocol/pending.js";
import { encodeStateFile } from "../protocol/state-file.js";
import { type ExecuteContext, PublishExecutionError, type WriteOutcome } from "./context.js";
import { deleteAfter, deleteFirst, undoCreated } from "./deletes.js";
import { confirmKept } from "./kept.js";

export { AmbiguousCommitError, StateChangedError };

import { encodeStream, verifiedEncoding } from "../content/encode.js";
import { encodingOf, metadataOptions } from "../content/metadata.js";
import { verifiedChunks, verifyingReader } from "../content/verify-source.js";

/**
 * Carries out a write plan in the commit order of docs/design/commit-protocol.md: outputs first (source copies streamed
 * and re-verified against the manifest; each write atomic, no-clobber or a compare-and-swap on
 * the version planning saw), then `.distributor.json` (a compare-and-swap against the version
 * planning read, resolved by reading back when its answer is lost), then the fenced deletes of
 * what the new state no longer records. Before the state is written, a failure removes exactly
 * the outputs this attempt is known to have created (while its lease is provably held) and
 * throws an `UncommittedError` listing what may remain; the previous state still describes the
 * destination.
 */
export async function executePublish(context: ExecuteContext, plan: PublishPlan): Promise<void> {
  await executeEncodedPublish(context, plan, undefined);
}

/** What a carried-out write plan committed: the version of the state it wrote. */
export interface Committed {
  stateVersion: string;
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
): Promise<Committed | undefined> {
  if (!isWriteAction(plan.action) || plan.nextState === undefined) {
    if (plan.action.startsWith("skip_")) return undefined;
    throw new PublishExecutionError(`cannot execute action ${plan.action}: ${plan.reason}`);
  }
  const writable = plan as PublishPlan & { nextState: StateDocument };
  // Validated and size-checked before the first delete or write: a state that could not be
  // written, or not read back, must not cost the destination anything.
  const state =
    encodedState ??
    encodeStateFile(
      context.destination,
      statePath(plan.bundlePath),
      plan.nextState,
      context.limits?.stateBytes,
    );
  const concurrency = context.concurrency ?? context.destination.writeConcurrency ?? 4;
  // Every write in flight listens to the run's signal and the lease's: give them their own.
  const stops = [context.signal, context.lease?.signal].filter((s) => s !== undefined);
  const combined = stops.length > 1 ? AbortSignal.any(stops) : stops[0];
  if (stops.length > 1 && combined !== undefined) setMaxListeners(0, combined);
  const scope = fanOutSignal(combined, concurrency);
  try {
    const scoped = { ...context, signal: scope.signal };
    // With deletes to follow, the state is committed marked (see `markReplacement`) until they
    // are done: a run killed in between leaves outputs no state records, which a skip reading
    // the state alone would otherwise never see. The unmarked bytes are written last.
    const cleaning = writable.clearBundlePath || writable.deletes.length > 0;
    const committed = cleaning ? markedBytes(scoped, writable, writable.nextState) : state;
    const stateVersion = await writeAndCommit(scoped, writable, concurrency, committed);
    if (!cleaning) return { stateVersion };
    try {
      await deleteAfter(scoped, writable);
    } catch (error) {
      // What was left in place is not this run's to delete: no run can finish it either.
      if (error instanceof PublishExecutionError)
        await unmark(scoped, writable, state, stateVersion);
      throw error;
    }
    return { stateVersion: await unmark(scoped, writable, state, stateVersion) };
  } finally {
    scope.dispose();
  }
}

/** `document` with this run's `replacing` marker for the plan's owner, encoded. */
function markedBytes(context: ExecuteContext, plan: PublishPlan, document: StateDocument) {
  const marker = {
    runId: context.lease?.runId ?? randomUUID(),
    startedAt: truncateToSecond(new Date()),
  };
  const path = statePath(plan.bundlePath);
  return encodeStateFile(
    context.destination,
    path,
    withReplacementMarker(document, plan.ownerScope, marker),
    context.limits?.stateBytes,
  );
}

/**
 * Step after the deletes: the committed state's marker goes, as a compare-and-swap on the
 * version committed. A failure leaves the marker for the next run's recovery (the lease is kept
 * for it): the publication stands, and the run says the rest is left.
 */
async function unmark(
  context: ExecuteContext,
  plan: PublishPlan,
  state: Uint8Array,
  committed: string,
): Promise<string> {
  try {
    context.lease?.assertHeld();
    return await compareAndSwapState(
      context.destination,
      statePath(plan.bundlePath),
      state,
      committed,
      context.signal,
    );
  } catch (error) {
    throw new PendingDeletesError(
      `published, but the state could not be marked finished: ${(error as Error).message}; the next run finishes it`,
      [],
      { cause: error },
    );
  }
}

/** Steps write → confirm → compare-and-swap state; a failure undoes what is known to be ours. */
async function writeAndCommit(
  context: ExecuteContext,
  plan: PublishPlan & { nextState: StateDocument },
  concurrency: number,
  state: Uint8Array,
): Promise<string> {
  const outcome: WriteOutcome = { created: new Map(), uncertain: new Set() };
  try {
    const expected = await markReplacement(context, plan);
    await deleteFirst(context, plan);
    await writeOutputs(context, plan, concurrency, outcome);
    // The held lease proves no other run broke it: only then may the state change.
    await context.lease?.confirm();
    await confirmKept(context, plan, concurrency);
    return await commitState(context, plan, state, expected);
  } catch (error) {
    if (error instanceof AmbiguousCommitError) {
      // The state may record what this attempt wrote: remove nothing, keep it all journaled —
      // and the deletes that follow a commit too: should the state have landed, the next run's
      // recovery removes them (it never removes a path a state records).
      const pending = [
        ...outcome.created.keys(),
        ...outcome.uncertain,
        ...plan.deletesFirst,
        ...plan.deletes,
      ];
      throw new UncommittedError(error.message, [...new Set(pending)], { cause: error });
    }
    const pending = await undoCreated(context, plan.bundlePath, outcome);
    if (error instanceof StateChangedError && pending.length === 0) throw error;
    const left =
      pending.length === 0
        ? ""
        : `; ${pending.length} path(s) it may have created stay journaled for the next run to remove`;
    throw new UncommittedError(`${(error as Error).message}${left}`, pending, { cause: error });
  }
}

/**
 * Step, before the first write: the state planning read is written back with a `replacing`
 * marker, as a compare-and-swap on its version. From then until the commit (and, when deletes
 * follow it, until they are done) the state says that its records may not describe what is
 * stored — outputs replaced in place, deleted ahead, or created and not yet recorded — so a run
 * reading it alone does not report a skip (docs/design/bundles.md reads nothing else) but waits for this run's
 * lease, or recovers what a dead one left. Resolves with the version the commit swaps: the
 * marked state's, or, where no state was there, none.
 */
async function markReplacement(
  context: ExecuteContext,
  plan: PublishPlan,
): Promise<string | undefined> {
  const read = plan.readState;
  // Every write where a state is there marks it, not only replacements in place: a run killed
  // part-way (or failing with an answer lost) leaves files no state records, and the next run
  // may well skip — the source it publishes may be the recorded one, or older. Without a state
  // the next run publishes anew, and recovers what is left first.
  if (read === undefined || plan.stateVersion === undefined) return plan.stateVersion;
  // A shared root this owner has no entry in yet records nothing of it to mark: its next run
  // publishes anew too.
  const probe = withReplacementMarker(read, plan.ownerScope, { runId: "", startedAt: new Date() });
  if (replacementMarker(probe, plan.ownerScope) === undefined) return plan.stateVersion;
  context.lease?.assertHeld();
  const path = statePath(plan.bundlePath);
  const marked = markedBytes(context, plan, read);
  return compareAndSwapState(context.destination, path, marked, plan.stateVersion, context.signal);
}

/**
 * Step: every output, in a bounded pool, assets before pages before index pages (`writePhases`);
 * each write checks the lease before it starts.
 */
async function writeOutputs(
  context: ExecuteContext,
  plan: PublishPlan,
  concurrency: number,
  outcome: WriteOutcome,
): Promise<void> {
  for (const phase of writePhases(plan.writes)) {
    await writePhase(context, plan, phase, concurrency, outcome);
  }
}

async function writePhase(
  context: ExecuteContext,
  plan: PublishPlan,
  writes: readonly PlannedWrite[],
  concurrency: number,
  outcome: WriteOutcome,
): Promise<void> {
  await mapBounded(writes, concurrency, async (write) => {
    context.lease?.assertHeld();
    const path = write.output.path;
    try {
      const { version } = await writeOutput(context, plan.bundlePath, write);
      if (!write.overwrite) outcome.created.set(path, version);
    } catch (error) {
      // A clean refusal (something appeared there) created nothing of ours; anything else may
      // have been done with its answer lost.
      if (!write.overwrite && !isStorageError(error, "already_exists")) {
        outcome.uncertain.add(path);
      }
      throw error;
    }
    context.onOutputWritten?.(write.output);
  });
}

/** Step: the compare-and-swap of the state against the version planning read, or marked. */
async function commitState(
  context: ExecuteContext,
  plan: PublishPlan,
  state: Uint8Array,
  expected: string | undefined,
): Promise<string> {
  context.lease?.assertHeld();
  const target = statePath(plan.bundlePath);
  return compareAndSwapState(context.destination, target, state, expected, context.signal);
}

async function writeOutput(
  context: ExecuteContext,
  bundlePath: string,
  write: PlannedWrite,
): Promise<{ version: string }> {
  const { output, overwrite, ifMatch } = write;
  const target = joinPrefix(bundlePath, output.path);
  const options = {
    overwrite,
    ...(ifMatch !== undefined ? { ifMatch } : {}),
    ...metadataOptions(output.metadata),
    size: output.size,
    sha256: output.sha256,
    signal: context.signal,
  };
  if (output.kind === "generated") {
    if (output.content === undefined) {
      throw new PublishExecutionError(`generated output ${output.path} has no rendered content`);
    }
    return context.destination.writeFile(target, output.content, options);
  }
  const sourcePath = joinPrefix(context.sourceBundlePath, output.sourcePath);
  const { source, signal } = context;
  const encoding = encodingOf(output.metadata);
  if (encoding !== undefined) {
    // Compressed while copied: the source is re-verified against the manifest, and the encoded
    // bytes against the digest planning recorded for them.
    const decoded = output.decoded;
    if (decoded === undefined) {
      throw new PublishExecutionError(
        `encoded output ${output.path} has no digest before encoding`,
      );
    }
    const readable = await source.openRead(sourcePath, { signal });
    try {
      const raw = verifiedChunks(readable, { path: output.sourcePath, ...decoded });
      const encoded = verifiedEncoding(encodeStream(raw, encoding), {
        path: output.path,
        sha256: output.sha256,
        size: output.size,
      });
      return await context.destination.writeFile(target, encoded, options);
    } finally {
      readable.destroy();
    }
  }
  const expected = { path: output.sourcePath, sha256: output.sha256, size: output.size };
  if (source.openReader !== undefined) {
    const reader = await source.openReader(sourcePath, { signal });
    try {
      return await context.destination.writeFile(
        target,
        verifyingReader(reader, expected),
        options,
      );
    } finally {
      // Writes close their reader; this covers a destination that failed before taking it.
      reader.close();
    }
  }
  const readable = await source.openRead(sourcePath, { signal });
  try {
    return await context.destination.writeFile(target, verifiedChunks(readable, expected), options);
  } finally {
    readable.destroy();
  }
}
