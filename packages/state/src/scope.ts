import { StateError } from "./errors.js";
import type { OwnerScope, SingleOwnerState } from "./types.js";

/** The owner scope of a pipeline publishing to one of its destinations. */
export function ownerScope(pipelineId: string, destinationId: string): OwnerScope {
  return { pipelineId, destinationId };
}

export function sameOwnerScope(a: OwnerScope, b: OwnerScope): boolean {
  return a.pipelineId === b.pipelineId && a.destinationId === b.destinationId;
}

/** `pipeline/destination`, as owners appear in messages. */
export function formatOwnerScope(scope: OwnerScope): string {
  return `${scope.pipelineId}/${scope.destinationId}`;
}

/** The owner scope a single-owner state was written for. */
export function singleOwnerScope(state: SingleOwnerState): OwnerScope {
  return ownerScope(state.pipelineId, state.destinationId);
}

/**
 * Refuses a single-owner state written by another pipeline or destination, before repairing or
 * pruning it: `state owner is A/B, not C/D`.
 */
export function assertSingleOwnerScope(state: SingleOwnerState, scope: OwnerScope): void {
  const owner = singleOwnerScope(state);
  if (!sameOwnerScope(owner, scope)) {
    throw new StateError(
      `state owner is ${formatOwnerScope(owner)}, not ${formatOwnerScope(scope)}`,
    );
  }
}

/** Map key for an owner scope; JSON keeps ids containing any character apart. */
export function ownerKey(scope: OwnerScope): string {
  return JSON.stringify([scope.pipelineId, scope.destinationId]);
}
