import type { Manifest } from "@distributor/bundle";
import {
  formatOwnerScope,
  isSharedRootState,
  manifestsEqual,
  type OwnerScope,
  type StateDocument,
  sameOwnerScope,
  singleOwnerScope,
} from "@distributor/state";
import { displayPath } from "@distributor/storage";
import type { DestinationConfig } from "../config/types.js";
import { errorMessage } from "../errors.js";
import type { AdoptionMode } from "./adopt-types.js";

// What `reconcile-state --adopt|--rebuild` requires of the state it finds, and whose records it keeps.

/** A refusal of one bundle path: reported, nothing written there. */
export class AdoptRefusal extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** Every recorded output path with the owner that records it. */
export function recordedOwners(document: StateDocument | undefined): Map<string, OwnerScope> {
  if (document === undefined) return new Map();
  if (isSharedRootState(document)) {
    return new Map(document.outputs.map((output) => [output.path, output.owner]));
  }
  const scope = singleOwnerScope(document);
  return new Map(document.outputs.map((output) => [output.path, scope]));
}

/**
 * Whether `mode` may go ahead at a bundle path with this state, and the state it builds on
 * (undefined when it starts from scratch). Refusals name what to run instead.
 */
export function checkPrecondition(
  mode: AdoptionMode,
  status: { state?: StateDocument | undefined; stateError?: unknown },
  owner: OwnerScope,
  target: { bundlePath: string; manifest: Manifest },
  destination: DestinationConfig,
): StateDocument | undefined {
  const where = `destination bundle path ${displayPath(target.bundlePath)}`;
  if (mode === "rebuild") {
    if (status.stateError === undefined) {
      throw new AdoptRefusal(
        "state_valid",
        `${where}: ${status.state === undefined ? "holds no state" : "holds valid state"}, so there is nothing to rebuild; use --adopt to record unmanaged outputs`,
      );
    }
    return undefined;
  }
  if (status.stateError !== undefined) {
    throw new AdoptRefusal(
      "state_invalid",
      `${where}: the state is not valid (${errorMessage(status.stateError)}); use --rebuild to replace it`,
    );
  }
  const state = status.state;
  if (state === undefined) return undefined;
  const wantsShared = destination.state.mode === "shared_root";
  if (isSharedRootState(state) !== wantsShared) {
    throw new AdoptRefusal(
      "state_mode_mismatch",
      `${where}: the state is ${isSharedRootState(state) ? "shared_root" : "single_owner"} but the destination is configured ${destination.state.mode}; publish to migrate it first`,
    );
  }
  if (!isSharedRootState(state)) {
    const recorded = singleOwnerScope(state);
    if (!sameOwnerScope(recorded, owner)) {
      throw new AdoptRefusal(
        "state_owner_mismatch",
        `${where}: state owner is ${formatOwnerScope(recorded)}, not ${formatOwnerScope(owner)}`,
      );
    }
    if (!manifestsEqual(state.source.manifest, target.manifest)) {
      throw new AdoptRefusal(
        "source_mismatch",
        `${where}: the state records source ${state.source.manifest.id} (${state.source.manifest.digest}), not the current ${target.manifest.id} (${target.manifest.digest}); adopt records outputs of the source the state records`,
      );
    }
    return state;
  }
  const recordedOwner = state.owners.find((o) => sameOwnerScope(o.scope, owner));
  if (
    recordedOwner !== undefined &&
    !manifestsEqual(recordedOwner.source.manifest, target.manifest)
  ) {
    throw new AdoptRefusal(
      "source_mismatch",
      `${where}: the state records source ${recordedOwner.source.manifest.id} for ${formatOwnerScope(owner)}, not the current ${target.manifest.id}; adopt records outputs of the source the state records`,
    );
  }
  return state;
}
