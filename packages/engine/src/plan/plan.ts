import type { StateDocument } from "@distributor/state";
import {
  displayPath,
  joinPrefix,
  LEASE_FILE_NAME,
  runSteps,
  STATE_FILE_NAME,
  type Steps,
} from "@distributor/storage";
import { storedStatus } from "../content/stored-digest.js";
import { type ActionDecision, applyForce, isWriteAction } from "./action.js";
import { decideAction } from "./decide.js";
import { journalOf } from "./journal.js";
import { completedStateDocument, nextStateDocument } from "./next-state.js";
import type { PlannedOutput } from "./outputs.js";
import type { DestinationInspection, PublishPlan, PublishRequest } from "./plan-types.js";
import {
  emptyPlan,
  listPaths,
  type RecordedOutput,
  recordMatches,
  recordsByPath,
} from "./records.js";
import { ancestorsOf, currentOwnerPathsSteps, refuse } from "./refuse.js";
import { planMetadataUpdate, planRepair } from "./repair.js";

// planPublish: the plan of one publication, from the target and what inspection saw.

/**
 * Decides what publishing `request` at the inspected destination does. Pure: every refusal
 * (conflict, unmanaged content, ownership, policy) is decided here, before anything is written or
 * deleted, and `--force` turns the refusals it may override into a forced replacement.
 */
export function planPublish(
  request: PublishRequest,
  inspection: DestinationInspection,
  // What `inspectDestination` decided from this very status (deciding is linear in the outputs:
  // about half a second at 10⁵, not to be done twice).
  decided: ActionDecision = decideAction(request, inspection.status),
): PublishPlan {
  return runSteps(planPublishSteps(request, inspection, decided));
}

/** Outputs looked at between two pauses of `planPublishSteps`. */
const STEP_OUTPUTS = 2000;

/**
 * `planPublish` as steps that pause between its phases and every few thousand outputs: planning
 * a million outputs is seconds of work, done under a lease when a run plans again.
 */
export function* planPublishSteps(
  request: PublishRequest,
  inspection: DestinationInspection,
  decided: ActionDecision,
): Steps<PublishPlan> {
  const tooLong = pathsTooLong(request, inspection);
  yield;
  if (tooLong !== undefined && (isWriteAction(decided.action) || request.outputs.length > 0)) {
    // Refused before the lease is taken, whatever --force says: the store cannot hold them.
    return emptyPlan(request, inspection, tooLong, request.outputs, request.primaryUrl);
  }
  if (decided.action === "skip_same" && request.repair && inspection.stored !== undefined) {
    return planRepair(request, inspection, decided);
  }
  if (decided.action === "update_metadata") return planMetadataUpdate(request, inspection, decided);
  // The paths the owner records matter only to a write (a million of them, for a skip, would be
  // a set built for nothing).
  const current = isWriteAction(decided.action)
    ? yield* currentOwnerPathsSteps(request.owner, inspection.status.state)
    : new Set<string>();
  let decision = decided;
  if (isWriteAction(decided.action) && decided.action !== "force_replace") {
    const refusal = refuse(request, decided, inspection, current);
    if (refusal !== undefined) decision = applyForce(refusal, request.force);
  }
  const plan = emptyPlan(request, inspection, decision, request.outputs, request.primaryUrl);
  if (!isWriteAction(plan.action)) return plan;

  const forced = plan.action === "force_replace";
  const versions = inspection.versions ?? new Map<string, string>();
  plan.clearBundlePath = forced;
  // A completion writes only the outputs whose record is not already exactly what it plans; so
  // does a replacement, of outputs also stored at their recorded size (one whose file went
  // missing or was cut short is written again).
  const completing = plan.action === "complete";
  const replacing = plan.action === "replace_older";
  const recorded =
    completing || replacing ? recordsByPath(request.owner, inspection.status.state) : undefined;
  // Under `--repair` a record whose stored bytes drifted is written again too.
  const drifted = (output: PlannedOutput, record: RecordedOutput) => {
    const found = inspection.stored?.get(output.path);
    return found !== undefined && storedStatus(found, record) !== "ok";
  };
  const storedAsRecorded = (output: PlannedOutput, record: RecordedOutput) =>
    inspection.existingOutputs.get(output.path) === "file" &&
    inspection.existingSizes?.get(output.path) === record.size;
  let toWrite = request.outputs;
  if (recorded !== undefined) {
    toWrite = [];
    for (const [index, output] of request.outputs.entries()) {
      if (index % STEP_OUTPUTS === STEP_OUTPUTS - 1) yield;
      const record = recorded.get(output.path);
      const write =
        record === undefined ||
        !recordMatches(record, output) ||
        (replacing && !storedAsRecorded(output, record)) ||
        drifted(output, record);
      if (write) toWrite.push(output);
    }
  }
  if (replacing) {
    // Checked again just before the commit: a kept output must still be what planning saw.
    const writing = new Set(toWrite.map((output) => output.path));
    const kept: [string, string][] = [];
    for (const [index, output] of request.outputs.entries()) {
      if (index % STEP_OUTPUTS === STEP_OUTPUTS - 1) yield;
      const version = versions.get(output.path);
      if (!writing.has(output.path) && version !== undefined) kept.push([output.path, version]);
    }
    plan.keptVersions = Object.fromEntries(kept);
  }
  plan.writes = [];
  for (const [index, output] of toWrite.entries()) {
    if (index % STEP_OUTPUTS === STEP_OUTPUTS - 1) yield;
    // A forced replacement claims whatever is there; otherwise only this owner's own outputs are
    // replaced in place. Every path where nothing is stored is a no-clobber create (and so is
    // journaled as one this attempt may create).
    const overwrite =
      inspection.existingOutputs.has(output.path) && (forced || current.has(output.path));
    const ifMatch = overwrite ? versions.get(output.path) : undefined;
    plan.writes.push(
      ifMatch === undefined ? { output, overwrite } : { output, overwrite, ifMatch },
    );
  }
  yield;
  const merging =
    (plan.action === "replace_older" || completing) && request.reconciliation === "merge";
  if (!forced && !merging) {
    const planned = new Set(request.outputs.map((output) => output.path));
    const plannedAncestors = ancestorsOf(planned);
    for (const path of current) {
      if (planned.has(path)) continue;
      const blocks =
        plannedAncestors.has(path) || [...ancestorsOf([path])].some((dir) => planned.has(dir));
      (blocks ? plan.deletesFirst : plan.deletes).push(path);
      const version = versions.get(path);
      if (version !== undefined) plan.deleteVersions[path] = version;
    }
  }
  const deleting = plan.deletes.length + plan.deletesFirst.length;
  const guard = tooManyDeletes(request, deleting, current.size);
  if (guard !== undefined) {
    return emptyPlan(request, inspection, guard, request.outputs, request.primaryUrl);
  }
  yield;
  plan.journal = journalOf(plan);
  yield;
  if (forced) {
    plan.keep = [...request.outputs.map((output) => output.path), STATE_FILE_NAME, LEASE_FILE_NAME];
    // The clear after the commit removes this owner's old outputs too: journaled, so that a
    // clear cut short leaves them for the next run rather than as unrecorded debris.
    const planned = new Set(request.outputs.map((output) => output.path));
    const retired = [...current].filter((path) => !planned.has(path));
    plan.journal.paths.push(...retired);
  }
  // What a write plan reports as its outputs is what it writes.
  if (replacing) plan.outputs = toWrite;
  if (completing) {
    // What it writes is what it reports; the state keeps its publication time and the records
    // it did not need to touch (their timestamps are what prune reads).
    plan.outputs = toWrite;
    plan.nextState = completedStateDocument(
      request,
      inspection.status.state as StateDocument,
      toWrite,
      [...plan.deletesFirst, ...plan.deletes],
    );
    return plan;
  }
  yield;
  plan.nextState = nextStateDocument(request, inspection.status.state, plan.action);
  return plan;
}

/**
 * A refusal when a path the plan would write (an output, or the state, lease and temp files of
 * its bundle path) is longer than the destination can hold (`maxPathBytes`): S3 answers a key
 * over 1 024 bytes with a bare 400, and a lease left behind by such a failure would name it.
 */
function pathsTooLong(
  request: PublishRequest,
  inspection: DestinationInspection,
): ActionDecision | undefined {
  const limit = inspection.maxPathBytes;
  if (limit === undefined) return undefined;
  const bytes = (path: string) => Buffer.byteLength(joinPrefix(request.bundlePath, path));
  // The longest name distributor keeps beside the state: a temp file's.
  const reserved = ".distributor.0123456789abcdef.tmp";
  const over = [reserved, ...request.outputs.map((output) => output.path)].filter(
    (path) => path.length > limit / 3 && bytes(path) > limit,
  );
  if (over.length === 0) return undefined;
  const first = over[0] as string;
  const what =
    first === reserved
      ? `destination bundle path ${displayPath(request.bundlePath)} leaves no room for its state file`
      : `${over.length} output path(s) are longer than the destination can hold: ${listPaths(over.map((path) => `${path} (${bytes(path)} bytes)`))}`;
  return {
    action: "fail_conflict",
    reason: `${what}; the longest path it holds below its root is ${limit} bytes; nothing was written`,
    code: "invalid_path",
  };
}

/**
 * The refusal of a plan that deletes more managed outputs than the destination's `max_deletes`
 * allows (a count, or a percentage of the `managed` outputs the owner has), unless
 * `--allow-deletes` allows at least that many. A guard against a source that lost most of its
 * files by mistake; a forced replacement, which clears the bundle path on purpose, is not
 * counted here.
 */
function tooManyDeletes(
  request: PublishRequest,
  deleting: number,
  managed: number,
): ActionDecision | undefined {
  const setting = request.maxDeletes;
  if (setting === undefined || deleting === 0) return undefined;
  const limit =
    typeof setting === "number" ? setting : Math.floor((managed * setting.percent) / 100);
  const allowed = Math.max(limit, request.allowDeletes ?? 0);
  if (deleting <= allowed) return undefined;
  const shown =
    typeof setting === "number" ? `${setting}` : `${setting.percent}% (${limit} of ${managed})`;
  return {
    action: "fail_conflict",
    reason: `the plan deletes ${deleting} managed output(s), more than max_deletes ${shown} allows; nothing was written. If the source really dropped them, run again with --allow-deletes ${deleting}`,
    code: "too_many_deletes",
  };
}
