import type { Manifest } from "@distributor/bundle";
import { manifestsEqual } from "./embedded-manifest.js";
import { errorMessage } from "./errors.js";
import { isKnownValid } from "./known-valid.js";
import { formatOwnerScope } from "./scope.js";
import { findOwner } from "./shared-root.js";
import {
  isSharedRootState,
  type OwnerScope,
  type SingleOwnerState,
  type StateDocument,
} from "./types.js";
import { sharedRootProblem, singleOwnerProblem } from "./validate.js";

/**
 * How the destination relates to the source being published. Comparison only describes; the
 * publish planner maps outcomes to actions with the transfer policy.
 */
export type ComparisonOutcome =
  /** No state and no content (or, for a shared root, no record of this owner). */
  | "destination_absent"
  /** Content but no state: distributor does not manage this destination. */
  | "destination_unmanaged"
  /** The state file is unreadable or breaks the schema. */
  | "invalid_state"
  /** Valid state written by another pipeline or destination. */
  | "identity_mismatch"
  /** The recorded source manifest equals the source. */
  | "same_source"
  /** Same source id, recorded `created` earlier than the source's. */
  | "destination_older"
  /** Same source id, recorded `created` later than the source's. */
  | "destination_newer"
  /** Same source id and `created`, different digest. */
  | "same_created_conflict"
  /** The recorded source has another id. */
  | "different_source_conflict";

export const COMPARISON_OUTCOMES: readonly ComparisonOutcome[] = [
  "destination_absent",
  "destination_unmanaged",
  "invalid_state",
  "identity_mismatch",
  "same_source",
  "destination_older",
  "destination_newer",
  "same_created_conflict",
  "different_source_conflict",
];

export interface Comparison {
  outcome: ComparisonOutcome;
  /** One sentence for people: why this outcome. */
  reason: string;
}

/** What inspecting the destination found, as plain data. */
export interface DestinationStatus {
  /** The parsed `.distributor.json`, when it exists and parsed. */
  state?: StateDocument;
  /** Why `.distributor.json` exists but could not be read as state (takes precedence). */
  stateError?: unknown;
  /** Whether the destination bundle path holds anything at all. */
  hasContents: boolean;
}

export type PathMappingMode = "preserve_relative" | "fixed";

export interface CompareOptions {
  /**
   * `fixed` destinations always hold the newest selected bundle, whatever its id, so a different
   * source id is compared by manifest `created` instead of being a conflict.
   */
  pathMapping?: PathMappingMode;
}

/** Compares the source with single-owner destination state written for `scope`. */
export function compare(
  source: Manifest,
  scope: OwnerScope,
  status: DestinationStatus,
  options: CompareOptions = {},
): Comparison {
  const document = status.state;
  if (document === undefined || status.stateError !== undefined) return compareWithoutState(status);
  if (isSharedRootState(document)) {
    // A shared root cannot be adopted by a single-owner destination; nor is it unmanaged.
    return {
      outcome: "identity_mismatch",
      reason: "destination state mode shared_root does not match single_owner",
    };
  }
  return compareSingleOwner(source, scope, document, options);
}

/**
 * Compares the source with the record of one owner of shared-root state. An owner without a
 * record is absent. Compatible single-owner state for the same pipeline and destination is
 * compared like that owner's record (the migration case); other single-owner state mismatches.
 */
export function compareSharedRootOwner(
  source: Manifest,
  scope: OwnerScope,
  status: DestinationStatus,
  options: CompareOptions = {},
): Comparison {
  const document = status.state;
  if (document === undefined || status.stateError !== undefined) return compareWithoutState(status);
  if (!isSharedRootState(document)) return compareSingleOwner(source, scope, document, options);
  const problem = isKnownValid(document) ? undefined : sharedRootProblem(document);
  if (problem !== undefined) return { outcome: "invalid_state", reason: problem };
  const owner = findOwner(document, scope);
  if (owner === undefined) {
    return {
      outcome: "destination_absent",
      reason: `destination owner ${formatOwnerScope(scope)} is absent`,
    };
  }
  return withPathMapping(
    compareManifests(source, owner.source.manifest),
    source,
    owner.source.manifest,
    options,
  );
}

/** Outcomes without usable state: an unreadable state file, or none at all. */
function compareWithoutState(status: DestinationStatus): Comparison {
  if (status.stateError !== undefined) {
    return { outcome: "invalid_state", reason: errorMessage(status.stateError) };
  }
  if (status.hasContents) {
    return {
      outcome: "destination_unmanaged",
      reason: "destination has content but no distributor state",
    };
  }
  return { outcome: "destination_absent", reason: "destination state is absent" };
}

function compareSingleOwner(
  source: Manifest,
  scope: OwnerScope,
  state: SingleOwnerState,
  options: CompareOptions,
): Comparison {
  // A parsed document was validated whole as it was parsed, and is frozen since.
  const problem = isKnownValid(state) ? undefined : singleOwnerProblem(state);
  if (problem !== undefined) return { outcome: "invalid_state", reason: problem };
  if (state.pipelineId !== scope.pipelineId) {
    return {
      outcome: "identity_mismatch",
      reason: `pipeline id ${JSON.stringify(state.pipelineId)} does not match ${JSON.stringify(scope.pipelineId)}`,
    };
  }
  if (state.destinationId !== scope.destinationId) {
    return {
      outcome: "identity_mismatch",
      reason: `destination id ${JSON.stringify(state.destinationId)} does not match ${JSON.stringify(scope.destinationId)}`,
    };
  }
  const recorded = state.source.manifest;
  return withPathMapping(compareManifests(source, recorded), source, recorded, options);
}

/** Compares two manifests of the same owner. */
export function compareManifests(source: Manifest, destination: Manifest): Comparison {
  if (manifestsEqual(source, destination)) {
    return { outcome: "same_source", reason: "destination source manifest matches source" };
  }
  if (destination.id !== source.id) {
    return {
      outcome: "different_source_conflict",
      reason: "destination source id differs from source",
    };
  }
  const recorded = destination.created.getTime();
  const current = source.created.getTime();
  if (recorded < current) {
    return { outcome: "destination_older", reason: "destination source is older than source" };
  }
  if (recorded > current) {
    return { outcome: "destination_newer", reason: "destination source is newer than source" };
  }
  if (destination.digest !== source.digest) {
    return {
      outcome: "same_created_conflict",
      reason: "destination source has same id and created time but different digest",
    };
  }
  return {
    outcome: "invalid_state",
    reason: "destination source differs from source without a supported comparison outcome",
  };
}

function withPathMapping(
  comparison: Comparison,
  source: Manifest,
  destination: Manifest,
  options: CompareOptions,
): Comparison {
  if (options.pathMapping !== "fixed" || comparison.outcome !== "different_source_conflict") {
    return comparison;
  }
  const recorded = destination.created.getTime();
  const current = source.created.getTime();
  if (recorded < current) {
    return {
      outcome: "destination_older",
      reason: "fixed destination source is older than selected source",
    };
  }
  if (recorded > current) {
    return {
      outcome: "destination_newer",
      reason: "fixed destination source is newer than selected source",
    };
  }
  return comparison;
}
