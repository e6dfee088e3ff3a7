import type { Manifest } from "@distributor/bundle";
import {
  compare,
  compareSharedRootOwner,
  findOutputByPath,
  formatOwnerScope,
  isSharedRootState,
  type OwnerScope,
  otherOwnerOutputs,
  ownerOutputs,
  type PathMappingMode,
  pathOwnershipConflict,
  type ReconciliationMode,
  type SharedRootOutputRecord,
  type SharedRootState,
  type SingleOwnerState,
  type StateMode,
  sameOwnerScope,
  singleOwnerAsOwnerOutputs,
  singleOwnerScope,
} from "@distributor/state";
import { displayPath } from "@distributor/storage";
import type { TransferPolicy } from "../config/types.js";
import {
  type ActionDecision,
  actionForComparison,
  isWriteAction,
  type PublishAction,
} from "./action.js";
import type { DestinationInspection } from "./inspect.js";
import type { PlannedOutput } from "./outputs.js";

/** Everything the planner needs besides the destination inspection. */
export interface PublishRequest {
  owner: OwnerScope;
  manifest: Manifest;
  /** Destination bundle path, relative to the destination root (`""` for the root). */
  bundlePath: string;
  outputs: PlannedOutput[];
  primaryUrl?: string | undefined;
  stateMode: StateMode;
  reconciliation: ReconciliationMode;
  pathMapping: PathMappingMode;
  transfer: TransferPolicy;
  force: boolean;
}

/** A decided publication: what will be deleted, written and recorded. Plain data. */
export interface PublishPlan {
  action: PublishAction;
  reason: string;
  force: boolean;
  stateMode: StateMode;
  ownerScope: OwnerScope;
  reconciliation: ReconciliationMode;
  bundlePath: string;
  manifest: Manifest;
  outputs: PlannedOutput[];
  primaryUrl?: string | undefined;
  existingState?: SingleOwnerState | undefined;
  existingSharedRoot?: SharedRootState | undefined;
  /** Outputs this owner already manages here (for single-owner state: all recorded outputs). */
  currentOwnerOutputs: SharedRootOutputRecord[];
  /** Shared root: outputs of other owners, preserved as they are. */
  otherOwnerOutputs: SharedRootOutputRecord[];
  /** Managed outputs omitted by this publication that merge keeps. */
  retainedOwnerOutputs: SharedRootOutputRecord[];
  /** Managed outputs omitted by this publication that replace deletes. */
  ownerOutputsToDelete: SharedRootOutputRecord[];
}

const MAX_LISTED_PATHS = 5;

function listPaths(paths: readonly string[]): string {
  const shown = paths.slice(0, MAX_LISTED_PATHS).join(", ");
  return paths.length > MAX_LISTED_PATHS
    ? `${shown} (and ${paths.length - MAX_LISTED_PATHS} more)`
    : shown;
}

/**
 * Decides what publishing `request` at the inspected destination does. Pure: every refusal
 * (conflict, unmanaged content, ownership) is decided here, before anything is deleted or written.
 */
export function planPublish(
  request: PublishRequest,
  inspection: DestinationInspection,
): PublishPlan {
  const { status } = inspection;
  const document = status.state;
  const existingState =
    document !== undefined && !isSharedRootState(document) ? document : undefined;
  const existingSharedRoot =
    document !== undefined && isSharedRootState(document) ? document : undefined;
  const compareOptions = { pathMapping: request.pathMapping };
  const comparison =
    request.stateMode === "shared_root"
      ? compareSharedRootOwner(request.manifest, request.owner, status, compareOptions)
      : compare(request.manifest, request.owner, status, compareOptions);
  const decision = actionForComparison(comparison, request.transfer, request.force);

  const currentOwnerOutputs = ownedByRequest(request.owner, existingState, existingSharedRoot);
  const plan: PublishPlan = {
    ...decision,
    force: decision.action === "force_replace",
    stateMode: request.stateMode,
    ownerScope: request.owner,
    reconciliation: request.reconciliation,
    bundlePath: request.bundlePath,
    manifest: request.manifest,
    outputs: request.outputs,
    primaryUrl: request.primaryUrl,
    existingState,
    existingSharedRoot,
    currentOwnerOutputs,
    otherOwnerOutputs:
      existingSharedRoot !== undefined ? otherOwnerOutputs(existingSharedRoot, request.owner) : [],
    retainedOwnerOutputs: [],
    ownerOutputsToDelete: [],
  };
  if (!isWriteAction(decision.action) || decision.action === "force_replace") return plan;

  const refusal = refuse(request, inspection, plan);
  if (refusal !== undefined) return { ...plan, ...refusal };

  if (decision.action === "replace_older") {
    const planned = new Set(request.outputs.map((output) => output.path));
    const omitted = currentOwnerOutputs.filter((output) => !planned.has(output.path));
    if (request.reconciliation === "merge") plan.retainedOwnerOutputs = omitted;
    else plan.ownerOutputsToDelete = omitted;
  }
  return plan;
}

/** The refusals that depend on what is stored, not only on the state comparison. */
function refuse(
  request: PublishRequest,
  inspection: DestinationInspection,
  plan: PublishPlan,
): ActionDecision | undefined {
  const managed = new Set(plan.currentOwnerOutputs.map((output) => output.path));
  if (plan.existingSharedRoot !== undefined) {
    const conflict = pathOwnershipConflict(
      plan.existingSharedRoot,
      request.owner,
      request.outputs.map((output) => output.path),
    );
    if (conflict !== undefined) {
      return {
        action: "fail_conflict",
        reason: `destination output path ${conflict.path} is owned by ${formatOwnerScope(conflict.owner)}`,
      };
    }
  }

  const singleOwnerReplace =
    request.stateMode === "single_owner" &&
    plan.existingState !== undefined &&
    plan.action === "replace_older" &&
    request.reconciliation === "replace";
  if (singleOwnerReplace) {
    // Replacement deletes the recorded outputs and then needs an empty bundle path: anything else
    // there is unmanaged and must stop the publication before the first delete.
    if (inspection.bundleListingLimit !== undefined) {
      return {
        action: "fail_unmanaged",
        reason: `destination bundle path ${displayPath(request.bundlePath)} holds more than ${inspection.bundleListingLimit} entries, so it cannot be confirmed to hold only managed outputs`,
      };
    }
    const unmanaged = (inspection.bundleFiles ?? []).filter((path) => !managed.has(path));
    if (unmanaged.length > 0) {
      return {
        action: "fail_unmanaged",
        reason: `destination bundle path ${displayPath(request.bundlePath)} holds content not managed by destination state: ${listPaths(unmanaged)}`,
      };
    }
    return undefined;
  }

  const collisions = inspection.existingOutputPaths.filter((path) => !managed.has(path));
  if (collisions.length > 0) {
    const what =
      request.stateMode === "single_owner" ? "merge output path" : "destination output path";
    return {
      action: "fail_unmanaged",
      reason: `${what} ${listPaths(collisions)} exists but is not managed by destination state`,
    };
  }
  return undefined;
}

/** Outputs the requesting owner manages at this destination, as shared-root records. */
function ownedByRequest(
  owner: OwnerScope,
  existingState: SingleOwnerState | undefined,
  existingSharedRoot: SharedRootState | undefined,
): SharedRootOutputRecord[] {
  if (existingSharedRoot !== undefined) return ownerOutputs(existingSharedRoot, owner);
  if (existingState !== undefined && sameOwnerScope(singleOwnerScope(existingState), owner)) {
    return singleOwnerAsOwnerOutputs(existingState);
  }
  return [];
}

/** True when `path` is recorded as managed by the requesting owner. */
export function isManagedByOwner(plan: PublishPlan, path: string): boolean {
  return findOutputByPath(plan.currentOwnerOutputs, path) !== undefined;
}
