import {
  formatOwnerScope,
  isSharedRootState,
  type OwnerScope,
  ownerOutputs,
  pathOwnershipConflict,
  type StateDocument,
  sameOwnerScope,
  singleOwnerScope,
} from "@distributor/state";
import {
  displayPath,
  isTempFileName,
  isWithinPrefix,
  LEASE_FILE_NAME,
  relativeTo,
  runSteps,
  STATE_FILE_NAME,
  type Steps,
} from "@distributor/storage";
import { entriesLimitText } from "../protocol/limits.js";
import type { ActionDecision } from "./action.js";
import { needsBundleListing } from "./decide.js";
import type { DestinationInspection, PublishRequest } from "./plan-types.js";
import { listPaths } from "./records.js";

// Refusals that depend on what is stored: other owners' paths and unmanaged entries.

/** The refusals that depend on what is stored, not only on the state comparison. */
export function refuse(
  request: PublishRequest,
  decided: ActionDecision,
  inspection: DestinationInspection,
  current: ReadonlySet<string>,
): ActionDecision | undefined {
  const document = inspection.status.state;
  if (document !== undefined && isSharedRootState(document)) {
    const conflict = pathOwnershipConflict(
      document,
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

  if (needsBundleListing(request, decided)) {
    const unmanaged = unmanagedEntries(request, inspection, current);
    if (unmanaged !== undefined) return unmanaged;
  }

  const merging = decided.action === "replace_older" && request.reconciliation === "merge";
  const currentAncestors = ancestorsOf(current);
  const collisions = request.outputs
    .map((output) => output.path)
    .filter((path) => {
      const kind = inspection.existingOutputs.get(path);
      if (kind === undefined) return false;
      if (kind === "file") return !current.has(path);
      // A directory of this owner's outputs that a replacement turns into a file.
      return !(kind === "directory" && currentAncestors.has(path) && !merging);
    });
  if (collisions.length > 0) {
    const what =
      request.stateMode === "single_owner" ? "merge output path" : "destination output path";
    return {
      action: "fail_unmanaged",
      reason: `${what} ${listPaths(collisions)} exists but is not managed by destination state`,
    };
  }

  // Something stored where a planned output needs a directory: only this owner's own output,
  // which a replacement deletes first, may stand there.
  const blocked: string[] = [];
  for (const [dir] of inspection.blockingAncestors ?? []) {
    if (!(current.has(dir) && !merging)) blocked.push(dir);
  }
  if (blocked.length > 0) {
    const own = blocked.filter((dir) => current.has(dir));
    return own.length === blocked.length
      ? {
          action: "fail_conflict",
          reason: `merge keeps recorded output ${listPaths(own)}, which stands where new outputs need a directory`,
        }
      : {
          action: "fail_unmanaged",
          reason: `${listPaths(blocked)} exists where new outputs need a directory and is not managed by destination state`,
        };
  }
  return undefined;
}

/**
 * A single-owner replacement needs a bundle path holding only the recorded outputs, the state,
 * the lease and the directories on their way: any other file, directory, link or odd name is
 * unmanaged and stops the publication before anything is touched.
 */
function unmanagedEntries(
  request: PublishRequest,
  inspection: DestinationInspection,
  current: ReadonlySet<string>,
): ActionDecision | undefined {
  const where = `destination bundle path ${displayPath(request.bundlePath)}`;
  if (inspection.bundleListingLimit !== undefined) {
    return {
      action: "fail_unmanaged",
      reason: `${where} holds ${entriesLimitText({ value: inspection.bundleListingLimit, setting: inspection.bundleListingSetting })}, so it cannot be confirmed to hold only managed outputs`,
    };
  }
  if (inspection.bundleEntries === undefined) {
    // A caller that skipped the listing cannot prove the path clean: refuse rather than guess.
    return { action: "fail_unmanaged", reason: `${where} was not listed before replacement` };
  }
  const ancestors = ancestorsOf(current);
  const unmanaged: string[] = [];
  for (const entry of inspection.bundleEntries) {
    if (!isWithinPrefix(request.bundlePath, entry.path)) continue;
    const path = relativeTo(request.bundlePath, entry.path);
    if (entry.nameProblem !== undefined) unmanaged.push(path);
    else if (entry.kind === "file") {
      // Temp files of a killed write are distributor's own; the lease holder removes them.
      const name = path.slice(path.lastIndexOf("/") + 1);
      const own = path === STATE_FILE_NAME || path === LEASE_FILE_NAME || isTempFileName(name);
      if (!current.has(path) && !own) unmanaged.push(path);
    } else if (entry.kind !== "directory" || !ancestors.has(path)) {
      unmanaged.push(entry.kind === "directory" ? `${path}/` : path);
    }
  }
  if (unmanaged.length === 0) return undefined;
  return {
    action: "fail_unmanaged",
    reason: `${where} holds content not managed by destination state: ${listPaths(unmanaged)}`,
  };
}

/** Every directory above the given paths (`a` and `a/b` for `a/b/c`). */
export function ancestorsOf(paths: Iterable<string>): Set<string> {
  const ancestors = new Set<string>();
  for (const path of paths) {
    for (let index = path.indexOf("/"); index !== -1; index = path.indexOf("/", index + 1)) {
      ancestors.add(path.slice(0, index));
    }
  }
  return ancestors;
}

/** Paths the requesting owner manages at this destination. */
export function currentOwnerPaths(
  owner: OwnerScope,
  document: StateDocument | undefined,
): ReadonlySet<string> {
  return runSteps(currentOwnerPathsSteps(owner, document));
}

/** `currentOwnerPaths` as steps that pause every few thousand outputs. */
export function* currentOwnerPathsSteps(
  owner: OwnerScope,
  document: StateDocument | undefined,
): Steps<ReadonlySet<string>> {
  const paths = new Set<string>();
  if (document === undefined) return paths;
  let outputs: readonly { path: string }[];
  if (isSharedRootState(document)) outputs = ownerOutputs(document, owner);
  else if (sameOwnerScope(singleOwnerScope(document), owner)) outputs = document.outputs;
  else return paths;
  for (const output of outputs) {
    paths.add(output.path);
    if (paths.size % 2000 === 0) yield;
  }
  return paths;
}
