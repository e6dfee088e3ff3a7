import {
  compare,
  compareSharedRootOwner,
  type DestinationStatus,
  formatOwnerScope,
  isSharedRootState,
  runSteps,
  type SingleOwnerState,
  type StateDocument,
  type Steps,
  sameOwnerScope,
  singleOwnerScope,
} from "@distributor/state";
import { type ActionDecision, actionForComparison, applyForce, isWriteAction } from "./action.js";
import {
  type CompletenessGaps,
  completenessGapsSteps,
  describeGaps,
  isComplete,
} from "./completeness.js";
import type { OutputSelection } from "./outputs.js";
import type { PublishTarget } from "./plan-types.js";
import { listPaths, metadataChangesSteps, ownedOutputRecords } from "./records.js";

// The action a state comparison and the transfer policy choose, and what completeness adds to it.

/**
 * The action the state comparison and transfer policy choose, before anything stored besides the
 * state is looked at. Pure; inspection uses it to read only what the plan will need.
 */
export function decideAction(target: PublishTarget, status: DestinationStatus): ActionDecision {
  return runSteps(decideSteps(target, status));
}

/**
 * `decideAction` as steps that pause between its phases (the comparison, the completeness check,
 * the metadata check: each a few hundred milliseconds at 10⁵ outputs), for `runInSlices`.
 */
export function* decideSteps(
  target: PublishTarget,
  status: DestinationStatus,
): Steps<ActionDecision> {
  const options = { pathMapping: target.pathMapping };
  const comparison =
    target.stateMode === "shared_root"
      ? compareSharedRootOwner(target.manifest, target.owner, status, options)
      : compare(target.manifest, target.owner, status, options);
  const decision = actionForComparison(comparison, target.transfer, target.force);
  yield;
  const keepsRecorded =
    decision.action === "skip_destination_newer" || decision.action === "skip_destination_older";
  if (keepsRecorded && status.state !== undefined) {
    const incomplete = yield* recordedPublicationGapsSteps(target, status.state);
    if (incomplete !== undefined) {
      // The run cannot complete a publication of a source it does not hold; saying "skipped"
      // would report as whole a destination that is not.
      return {
        action: "fail_conflict",
        reason: `${decision.reason}, but the destination does not hold the whole publication of the source it records (${describeGaps(incomplete, listPaths)}): run that source again, or a newer one, to complete it`,
        code: "incomplete_publication",
      };
    }
  }
  if (decision.action === "skip_same" && status.state !== undefined) {
    const gaps = yield* recordGapsSteps(target, status.state);
    if (gaps !== undefined && !isComplete(gaps)) {
      return {
        action: "complete",
        reason: `${decision.reason}, but its records are not the outputs it gives under this configuration: ${describeGaps(gaps, listPaths)}`,
      };
    }
    yield;
    const changed = yield* metadataChangesSteps(target, status.state);
    if (changed.length > 0) {
      return {
        action: "update_metadata",
        reason: `${decision.reason}; the metadata rules give ${changed.length} output(s) other metadata: ${listPaths(changed)}`,
      };
    }
  }
  const singleOwnerInShared =
    target.stateMode === "shared_root" &&
    status.state !== undefined &&
    !isSharedRootState(status.state) &&
    !sameOwnerScope(singleOwnerScope(status.state), target.owner);
  if (
    singleOwnerInShared &&
    isWriteAction(decision.action) &&
    decision.action !== "force_replace"
  ) {
    // Only the owner's own single-owner state migrates into a shared root.
    const state = status.state as SingleOwnerState;
    return applyForce(
      {
        action: "fail_conflict",
        reason: `destination state belongs to ${formatOwnerScope(singleOwnerScope(state))}, not ${formatOwnerScope(target.owner)}`,
      },
      target.force,
    );
  }
  return decision;
}

/**
 * How the owner's records in `document` fall short of the outputs `target` plans from its
 * manifest, when the document is of the target's state mode (a single-owner state met by a
 * shared-root target migrates with the next new source, not here). Pure; reads the state only.
 */
export function recordGaps(target: PublishTarget, document: StateDocument) {
  return runSteps(recordGapsSteps(target, document));
}

/** `recordGaps` as steps (see `completenessGapsSteps`). */
export function* recordGapsSteps(
  target: PublishTarget,
  document: StateDocument,
): Steps<CompletenessGaps | undefined> {
  if (target.planned === undefined) return undefined;
  if (isSharedRootState(document) !== (target.stateMode === "shared_root")) return undefined;
  return yield* completenessGapsSteps(
    target.planned,
    target.manifest,
    ownedOutputRecords(document, target.owner),
    target.reconciliation,
  );
}

/**
 * The gaps of the publication the state records for the target's owner (its recorded source
 * under the configuration in force), when there are any and the target can select outputs.
 */
function* recordedPublicationGapsSteps(
  target: PublishTarget,
  document: StateDocument,
): Steps<CompletenessGaps | undefined> {
  if (target.selectFor === undefined) return undefined;
  if (isSharedRootState(document) !== (target.stateMode === "shared_root")) return undefined;
  const manifest = isSharedRootState(document)
    ? document.owners.find((o) => sameOwnerScope(o.scope, target.owner))?.source.manifest
    : sameOwnerScope(singleOwnerScope(document), target.owner)
      ? document.source.manifest
      : undefined;
  if (manifest === undefined) return undefined;
  let selection: readonly OutputSelection[];
  try {
    selection = target.selectFor(manifest);
  } catch {
    // The configuration cannot select from the recorded source: planning a write says why.
    return undefined;
  }
  const gaps = yield* completenessGapsSteps(
    selection,
    manifest,
    ownedOutputRecords(document, target.owner),
    target.reconciliation,
  );
  return isComplete(gaps) ? undefined : gaps;
}

/** True when planning must list the bundle path: a single-owner replacement proves it is clean. */
export function needsBundleListing(target: PublishTarget, decision: ActionDecision): boolean {
  return (
    decision.action === "replace_older" &&
    target.stateMode === "single_owner" &&
    target.reconciliation === "replace"
  );
}
