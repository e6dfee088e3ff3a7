import { type StateDocument, truncateToSecond } from "@distributor/state";
import { type StoredFile, storedStatus } from "../content/stored-digest.js";
import type { ActionDecision } from "./action.js";
import { journalOf } from "./journal.js";
import { adoptedStateDocument, updatedRecordsDocument } from "./next-state.js";
import type { PlannedOutput } from "./outputs.js";
import type { DestinationInspection, PublishPlan, PublishRequest } from "./plan-types.js";
import {
  emptyPlan,
  listPaths,
  metadataChanges,
  ownedOutputRecords,
  recordedPrimaryUrl,
  reproduces,
} from "./records.js";

// Plans that keep the recorded source: a repair of drifted outputs, and new object metadata.

/**
 * A repair (`run --repair`): the state records this source, and the recorded outputs whose
 * stored bytes are missing or differ are written again, exactly as recorded: a missing one as a
 * no-clobber create, a changed one as an overwrite fenced on the version hashed. Nothing else is
 * written or deleted; the state is rewritten unchanged but for its `updated_at` (the commit
 * point of docs/design/commit-protocol.md). A record the current source cannot reproduce byte for byte (a rendering
 * that changed, a configuration that no longer selects it), or a path where a directory or link
 * now stands, refuses the repair before anything is touched.
 */
export function planRepair(
  request: PublishRequest,
  inspection: DestinationInspection,
  skip: ActionDecision,
): PublishPlan {
  const document = inspection.status.state as StateDocument;
  const records = ownedOutputRecords(document, request.owner);
  const stored = inspection.stored ?? new Map<string, StoredFile>();
  const plan = emptyPlan(
    request,
    inspection,
    skip,
    [],
    recordedPrimaryUrl(document, request.owner),
  );
  const drifted = records.filter((record) => {
    const found = stored.get(record.path);
    return found !== undefined && storedStatus(found, record) !== "ok";
  });
  // Outputs of the recorded source that no record covers (after a partial adoption or a
  // rebuild, or a record dropped by reconcile-state) and where nothing is stored are published.
  const recordedPaths = new Set(document.outputs.map((output) => output.path));
  const added = request.outputs.filter(
    (output) => !recordedPaths.has(output.path) && stored.get(output.path)?.kind === "missing",
  );
  if (drifted.length === 0 && added.length === 0) return plan;
  const planned = new Map(request.outputs.map((output) => [output.path, output]));
  const blocked: string[] = [];
  const unreproducible: string[] = [];
  const reencoded: PlannedOutput[] = [];
  for (const record of drifted) {
    const found = stored.get(record.path);
    const output = planned.get(record.path);
    if (found !== undefined && found.kind !== "file" && found.kind !== "missing") {
      blocked.push(`${record.path} (${found.kind})`);
    } else if (output === undefined || !reproduces(output, record)) {
      unreproducible.push(record.path);
    } else {
      // An encoded output whose encoder now gives other bytes: its record takes the new digest.
      if (output.sha256 !== record.sha256 || output.size !== record.size) reencoded.push(output);
      const overwrite = found?.kind === "file";
      const ifMatch = found?.kind === "file" ? found.version : undefined;
      plan.writes.push(
        ifMatch === undefined ? { output, overwrite } : { output, overwrite, ifMatch },
      );
    }
  }
  if (blocked.length > 0) {
    return refusedRepair(
      plan,
      "fail_unmanaged",
      `${listPaths(blocked)} stands where the state records a managed output`,
    );
  }
  if (unreproducible.length > 0) {
    return refusedRepair(
      plan,
      "fail_conflict",
      `cannot restore ${listPaths(unreproducible)}: the current source and configuration do not produce the bytes the state records; publish a new source instead`,
    );
  }
  const describe = plan.writes.map(
    (write) => `${write.output.path} (${write.overwrite ? "changed" : "missing"})`,
  );
  plan.action = "repair";
  plan.reason = `${skip.reason}; restores ${plan.writes.length} managed output(s): ${listPaths(describe)}`;
  if (added.length > 0) {
    const paths = added.map((output) => output.path);
    plan.reason =
      plan.writes.length === 0
        ? `${skip.reason}; publishes ${added.length} output(s) of the recorded source the state lacks: ${listPaths(paths)}`
        : `${plan.reason}; publishes ${added.length} output(s) the state lacks: ${listPaths(paths)}`;
    for (const output of added) plan.writes.push({ output, overwrite: false });
  }
  plan.outputs = plan.writes.map((write) => write.output);
  const journal = journalOf(plan);
  // The bytes replaced in place were never recorded: recovery must not take a path still
  // holding them for a record this attempt made stale (it would drop the record and delete
  // the file, and a later repair could no longer restore it).
  plan.journal = { ...journal, overwrites: [] };
  const base =
    reencoded.length === 0
      ? document
      : updatedRecordsDocument(document, request.owner, reencoded, request.now);
  plan.nextState =
    added.length === 0
      ? { ...base, updatedAt: truncateToSecond(request.now) }
      : adoptedStateDocument({ ...request, outputs: added }, base);
  return plan;
}

/**
 * An `update_metadata` plan: the state records this source, and the outputs whose metadata the
 * rules changed are stored again with the new metadata (encoded anew when the encoding changed),
 * each an overwrite fenced on the version planning saw (or a create where the file is gone).
 * Their records are updated; nothing else is written or deleted. Something other than a file at
 * one of those paths refuses the update before anything is touched.
 */
export function planMetadataUpdate(
  request: PublishRequest,
  inspection: DestinationInspection,
  decision: ActionDecision,
): PublishPlan {
  const document = inspection.status.state as StateDocument;
  const changed = new Set(metadataChanges(request, document));
  const versions = inspection.versions ?? new Map<string, string>();
  const plan = emptyPlan(
    request,
    inspection,
    decision,
    [],
    recordedPrimaryUrl(document, request.owner),
  );
  const blocked: string[] = [];
  for (const output of request.outputs) {
    if (!changed.has(output.path)) continue;
    const kind = inspection.existingOutputs.get(output.path);
    if (kind !== undefined && kind !== "file") {
      blocked.push(`${output.path} (${kind})`);
      continue;
    }
    const overwrite = kind === "file";
    const ifMatch = overwrite ? versions.get(output.path) : undefined;
    plan.writes.push(
      ifMatch === undefined ? { output, overwrite } : { output, overwrite, ifMatch },
    );
  }
  if (blocked.length > 0) {
    return refusedRepair(
      plan,
      "fail_unmanaged",
      `${listPaths(blocked)} stands where the state records a managed output`,
    );
  }
  plan.outputs = plan.writes.map((write) => write.output);
  // Like a repair's, these overwrites replace recorded outputs of the recorded source: should
  // the attempt die before its commit, recovery keeps their records (not "stale"), and the next
  // run, finding the old metadata still recorded, stores them again and commits.
  plan.journal = { ...journalOf(plan), overwrites: [] };
  plan.nextState = updatedRecordsDocument(document, request.owner, plan.outputs, request.now);
  return plan;
}

function refusedRepair(
  plan: PublishPlan,
  action: "fail_conflict" | "fail_unmanaged",
  reason: string,
): PublishPlan {
  return { ...plan, action, reason, writes: [] };
}
