import type { Comparison } from "@distributor/state";

export type OnDestinationSame = "skip" | "fail";
export type OnDestinationOlder = "replace" | "skip" | "fail";
export type OnDestinationNewer = "skip" | "fail";
export type OnConflict = "fail";

/** What a publication does when the destination already holds the same, an older or a newer source. */
export interface TransferPolicy {
  onDestinationSame: OnDestinationSame;
  onDestinationOlder: OnDestinationOlder;
  onDestinationNewer: OnDestinationNewer;
  onConflict: OnConflict;
}

/**
 * What publication does at one destination bundle path. The labels are part of the contract;
 * `repair` (`run --repair`: restore missing or changed managed outputs of a destination whose
 * state already records the current source) and `update_metadata` (the state records the current
 * source, but the destination's metadata rules now give some of its outputs other metadata:
 * exactly those are stored again) and `complete` (the state records the current source, but its
 * records are not the outputs that source gives under the configuration in force: the missing or
 * different ones are written and the ones no longer produced deleted) extend the reference
 * implementation's list.
 */
export type PublishAction =
  | "publish_new"
  | "replace_older"
  | "force_replace"
  | "skip_same"
  | "skip_destination_older"
  | "skip_destination_newer"
  | "fail_conflict"
  | "fail_unmanaged"
  | "repair"
  | "update_metadata"
  | "complete";

const WRITE_ACTIONS: ReadonlySet<PublishAction> = new Set([
  "publish_new",
  "replace_older",
  "force_replace",
  "repair",
  "update_metadata",
  "complete",
]);

export function isWriteAction(action: PublishAction): boolean {
  return WRITE_ACTIONS.has(action);
}

export function isFailAction(action: PublishAction): boolean {
  return action === "fail_conflict" || action === "fail_unmanaged";
}

export const DEFAULT_TRANSFER_POLICY: TransferPolicy = {
  onDestinationSame: "skip",
  onDestinationOlder: "replace",
  onDestinationNewer: "skip",
  onConflict: "fail",
};

export interface ActionDecision {
  action: PublishAction;
  reason: string;
  /**
   * For a refusal with a cause of its own: the error code its report carries instead of the
   * action's (`state_invalid` for a state that cannot be read as state).
   */
  code?: string | undefined;
}

/** `--force` claims conflicts, unmanaged content and newer destinations; a same source stays skipped. */
export function applyForce(decision: ActionDecision, force: boolean): ActionDecision {
  if (!force) return decision;
  switch (decision.action) {
    case "fail_conflict":
    case "fail_unmanaged":
    case "skip_destination_newer":
      return { action: "force_replace", reason: `forced replacement: ${decision.reason}` };
    default:
      return decision;
  }
}

/**
 * Maps a comparison outcome through the transfer policy, then applies `--force`. An identical
 * source is never republished: `skip_same` stays a skip and `on_destination_same: fail` stays a
 * failure under `--force`, which exists to claim conflicting, unmanaged or newer content.
 */
export function actionForComparison(
  comparison: Comparison,
  transfer: TransferPolicy,
  force: boolean,
): ActionDecision {
  const decision = decide(comparison, transfer);
  return comparison.outcome === "same_source" ? decision : applyForce(decision, force);
}

function decide(comparison: Comparison, transfer: TransferPolicy): ActionDecision {
  const { reason } = comparison;
  switch (comparison.outcome) {
    case "destination_absent":
      return { action: "publish_new", reason };
    case "destination_unmanaged":
      return { action: "fail_unmanaged", reason };
    case "same_source":
      return transfer.onDestinationSame === "skip"
        ? { action: "skip_same", reason }
        : { action: "fail_conflict", reason: `${reason} and transfer.on_destination_same is fail` };
    case "destination_older":
      switch (transfer.onDestinationOlder) {
        case "replace":
          return { action: "replace_older", reason };
        case "skip":
          return {
            action: "skip_destination_older",
            reason: `${reason} and transfer.on_destination_older is skip`,
          };
        case "fail":
          return {
            action: "fail_conflict",
            reason: `${reason} and transfer.on_destination_older is fail`,
          };
      }
      break;
    case "destination_newer":
      return transfer.onDestinationNewer === "skip"
        ? { action: "skip_destination_newer", reason: `${reason}; replacing it requires --force` }
        : {
            action: "fail_conflict",
            reason: `${reason} and transfer.on_destination_newer is fail`,
          };
    case "invalid_state":
      return {
        action: "fail_conflict",
        reason: `${reason}; \`distributor reconcile-state --rebuild\` replaces it — with a state written from the source, or under layout: releases with the committed snapshot of the release current links to (try --dry-run first)`,
        code: "state_invalid",
      };
    case "identity_mismatch":
      // Another pipeline's or destination's state (or another state mode) at this bundle path:
      // the code every command gives for a state that is not this owner's.
      return {
        action: "fail_conflict",
        reason: `${reason}: the state at this bundle path is not this pipeline and destination's`,
        code: "not_owner",
      };
    case "same_created_conflict":
    case "different_source_conflict":
      return { action: "fail_conflict", reason };
  }
  return { action: "fail_conflict", reason };
}
