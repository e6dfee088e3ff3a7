import { posix } from "node:path";
import type { Manifest } from "@distributor/bundle";
import {
  compare,
  compareSharedRootOwner,
  type DecodedDigest,
  type DestinationStatus,
  formatOwnerScope,
  isSharedRootState,
  type OutputKind,
  type OutputMetadata,
  type OwnerScope,
  outputsByPath,
  ownerOutputs,
  type PathMappingMode,
  pathOwnershipConflict,
  type ReconciliationMode,
  type SingleOwnerState,
  type SourceSigner,
  type StateDocument,
  type StateMode,
  sameOwnerScope,
  singleOwnerScope,
  truncateToSecond,
} from "@distributor/state";
import {
  displayPath,
  isTempFileName,
  isWithinPrefix,
  joinPrefix,
  LEASE_FILE_NAME,
  relativeTo,
  STATE_FILE_NAME,
  type StorageEntry,
} from "@distributor/storage";
import { type StoredFile, storedStatus } from "../execute/stored-digest.js";
import {
  adoptedStateDocument,
  completedStateDocument,
  nextStateDocument,
  updatedRecordsDocument,
} from "../protocol/next-state.js";
import type { TransferPolicy } from "./action.js";
import {
  type ActionDecision,
  actionForComparison,
  applyForce,
  isWriteAction,
  type PublishAction,
} from "./action.js";
import { completenessGaps, describeGaps, isComplete } from "./completeness.js";
import { sameMetadata } from "./metadata.js";
import type { OutputSelection, PlannedOutput } from "./outputs.js";

/** Where and as whom a bundle is published: everything the action decision depends on. */
export interface PublishTarget {
  owner: OwnerScope;
  manifest: Manifest;
  /** Who signed the manifest (`source.signatures`); the next state records it. */
  signer?: SourceSigner | undefined;
  /** Destination bundle path, relative to the destination root (`""` for the root). */
  bundlePath: string;
  stateMode: StateMode;
  reconciliation: ReconciliationMode;
  pathMapping: PathMappingMode;
  transfer: TransferPolicy;
  force: boolean;
  /**
   * `run --repair`: when the state already records this source (`skip_same`), restore the
   * managed outputs whose stored bytes are missing or differ from their records.
   */
  repair?: boolean | undefined;
  /**
   * The outputs the destination's configuration selects from the manifest, with the object
   * metadata its rules give each. A state that records this source is compared with them: other
   * outputs than these recorded (missing, different, no longer produced) are converged
   * (`complete`); only other metadata, brought up to date (`update_metadata`). Absent: neither
   * is compared.
   */
  planned?: readonly OutputSelection[] | undefined;
  /**
   * The outputs the destination's configuration selects from another manifest: a skip that keeps
   * the recorded source (it is newer, or the policy skips an older one) checks that source's
   * publication with it. Absent: not checked.
   */
  selectFor?: ((manifest: Manifest) => readonly OutputSelection[]) | undefined;
  /** The destination's `max_deletes` (see `DestinationConfig.maxDeletes`). */
  maxDeletes?: number | { percent: number } | undefined;
  /** `--allow-deletes N`: a plan may delete up to N outputs whatever `maxDeletes` says. */
  allowDeletes?: number | undefined;
}

/** A target with the outputs it would publish and what the next state records. */
export interface PublishRequest extends PublishTarget {
  outputs: PlannedOutput[];
  primaryUrl?: string | undefined;
  /** Time recorded in the next state (truncated to whole seconds). */
  now: Date;
  distributorVersion?: string | undefined;
}

/** What the planner knows about one destination bundle path, as plain data. */
export interface DestinationInspection {
  bundlePath: string;
  status: DestinationStatus;
  /** Version token of the state file read, when there is one. */
  stateVersion?: string | undefined;
  /**
   * Planned output paths (relative to the bundle path) where something is stored already, with
   * its kind: a directory or symlink there can never be overwritten as a managed file.
   */
  existingOutputs: ReadonlyMap<string, StorageEntry["kind"]>;
  /** Directories above planned paths where something else is stored (a file, a symlink). */
  blockingAncestors?: ReadonlyMap<string, StorageEntry["kind"]> | undefined;
  /**
   * Every entry below the bundle path (backend-relative paths), listed when the decision needs to
   * prove the path holds nothing unmanaged (single-owner replacement).
   */
  bundleEntries?: readonly StorageEntry[] | undefined;
  /** `StorageBackend.maxPathBytes` of the destination: longer planned paths are refused. */
  maxPathBytes?: number | undefined;
  /** Set instead of `bundleEntries` when the bundle path holds more entries than this limit. */
  bundleListingLimit?: number | undefined;
  /**
   * Version tokens of the files stored at planned paths and at the paths this owner manages now
   * (bundle-relative): overwrites and deletes are fenced on them.
   */
  versions?: ReadonlyMap<string, string> | undefined;
  /**
   * For a repair: what is stored at each of this owner's recorded outputs (bundle-relative),
   * hashed. Present only when the decision was `skip_same` and the target asks for a repair.
   */
  stored?: ReadonlyMap<string, StoredFile> | undefined;
}

/** One output to write, and whether it may replace what is stored at its path. */
export interface PlannedWrite {
  output: PlannedOutput;
  overwrite: boolean;
  /**
   * For an overwrite: the version planning saw at the path. The write is a compare-and-swap on
   * it, so a run that lost its lease cannot replace bytes a newer run wrote (docs/design/commit-protocol.md, fencing).
   */
  ifMatch?: string | undefined;
}

/**
 * What a write plan records under its lease before the first write (docs/design/commit-protocol.md, journal): the paths
 * it may create or will delete, and the directories (`""` for the bundle path) where its temp
 * files and new directories may appear. Recovery after a crash removes exactly these.
 */
export interface PlanJournal {
  paths: string[];
  directories: string[];
  /**
   * The paths of `paths` it replaces in place. Should the attempt fail after one of them, the
   * previous state records bytes that are gone: recovery checks these against the state.
   */
  overwrites: string[];
}

/**
 * A decided publication, plain data: the executor writes `writes`, then `nextState`, then deletes
 * `deletes` (and, for a forced replacement, everything else below the bundle path). It decides
 * nothing itself.
 */
export interface PublishPlan {
  action: PublishAction;
  reason: string;
  /** A refusal's own error code (see `ActionDecision.code`). */
  code?: string | undefined;
  bundlePath: string;
  ownerScope: OwnerScope;
  stateMode: StateMode;
  reconciliation: ReconciliationMode;
  manifest: Manifest;
  /** What this publication publishes (reported for every action). */
  outputs: PlannedOutput[];
  primaryUrl?: string | undefined;
  writes: PlannedWrite[];
  /**
   * Managed outputs the next state no longer records that stand in the way of a planned output
   * (a file `a` when `a/b` is planned, or `a/b` when `a` is): deleted before the writes. Their
   * paths are in one version only, so no path of both versions is ever missing.
   */
  deletesFirst: string[];
  /** Bundle-relative paths of managed outputs the next state no longer records. */
  deletes: string[];

  /**
   * Versions planning saw at the paths of `deletes` and `deletesFirst`: each delete happens only
   * while the path still holds that version (docs/design/commit-protocol.md, fencing).
   */
  deleteVersions: Record<string, string>;
  /** Forced replacement: every entry below the bundle path not in the next state goes too. */
  clearBundlePath: boolean;
  /** What a forced replacement's clearing keeps: the next state's outputs, state and lease. */
  keep: string[];
  /** Recorded with the lease before the first write (empty unless the action writes). */
  journal: PlanJournal;
  /** The state written after the outputs; absent unless the action writes. */
  nextState?: StateDocument | undefined;
  /** Version of the state planning read (undefined when there was none). */
  stateVersion?: string | undefined;
  /**
   * The state planning read, when it could be parsed: a write marks it before its first change
   * (see `ReplacementMarker`), and its markers tell whether a decision made from it alone may
   * stand. Not part of a saved plan.
   */
  readState?: StateDocument | undefined;
}

const MAX_LISTED_PATHS = 5;

function listPaths(paths: readonly string[]): string {
  const shown = paths.slice(0, MAX_LISTED_PATHS).join(", ");
  return paths.length > MAX_LISTED_PATHS
    ? `${shown} (and ${paths.length - MAX_LISTED_PATHS} more)`
    : shown;
}

/**
 * The action the state comparison and transfer policy choose, before anything stored besides the
 * state is looked at. Pure; inspection uses it to read only what the plan will need.
 */
export function decideAction(target: PublishTarget, status: DestinationStatus): ActionDecision {
  const options = { pathMapping: target.pathMapping };
  const comparison =
    target.stateMode === "shared_root"
      ? compareSharedRootOwner(target.manifest, target.owner, status, options)
      : compare(target.manifest, target.owner, status, options);
  const decision = actionForComparison(comparison, target.transfer, target.force);
  const keepsRecorded =
    decision.action === "skip_destination_newer" || decision.action === "skip_destination_older";
  if (keepsRecorded && status.state !== undefined) {
    const incomplete = recordedPublicationGaps(target, status.state);
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
    const gaps = recordGaps(target, status.state);
    if (gaps !== undefined && !isComplete(gaps)) {
      return {
        action: "complete",
        reason: `${decision.reason}, but its records are not the outputs it gives under this configuration: ${describeGaps(gaps, listPaths)}`,
      };
    }
    const changed = metadataChanges(target, status.state);
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
  if (target.planned === undefined) return undefined;
  if (isSharedRootState(document) !== (target.stateMode === "shared_root")) return undefined;
  return completenessGaps(
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
function recordedPublicationGaps(target: PublishTarget, document: StateDocument) {
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
  const gaps = completenessGaps(
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

/**
 * Decides what publishing `request` at the inspected destination does. Pure: every refusal
 * (conflict, unmanaged content, ownership, policy) is decided here, before anything is written or
 * deleted, and `--force` turns the refusals it may override into a forced replacement.
 */
export function planPublish(
  request: PublishRequest,
  inspection: DestinationInspection,
): PublishPlan {
  const decided = decideAction(request, inspection.status);
  const tooLong = pathsTooLong(request, inspection);
  if (tooLong !== undefined && (isWriteAction(decided.action) || request.outputs.length > 0)) {
    // Refused before the lease is taken, whatever --force says: the store cannot hold them.
    return emptyPlan(request, inspection, tooLong, request.outputs, request.primaryUrl);
  }
  if (decided.action === "skip_same" && request.repair && inspection.stored !== undefined) {
    return planRepair(request, inspection, decided);
  }
  if (decided.action === "update_metadata") return planMetadataUpdate(request, inspection, decided);
  const current = currentOwnerPaths(request.owner, inspection.status.state);
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
  // A completion writes only the outputs whose record is not already exactly what it plans.
  const completing = plan.action === "complete";
  const recorded = completing ? recordsByPath(request.owner, inspection.status.state) : undefined;
  // Under `--repair` a record whose stored bytes drifted is written again too.
  const drifted = (output: PlannedOutput, record: RecordedOutput) => {
    const found = inspection.stored?.get(output.path);
    return found !== undefined && storedStatus(found, record) !== "ok";
  };
  const toWrite =
    recorded === undefined
      ? request.outputs
      : request.outputs.filter((output) => {
          const record = recorded.get(output.path);
          return record === undefined || !recordMatches(record, output) || drifted(output, record);
        });
  plan.writes = toWrite.map((output) => {
    // A forced replacement claims whatever is there; otherwise only this owner's own outputs are
    // replaced in place. Every path where nothing is stored is a no-clobber create (and so is
    // journaled as one this attempt may create).
    const overwrite =
      inspection.existingOutputs.has(output.path) && (forced || current.has(output.path));
    const ifMatch = overwrite ? versions.get(output.path) : undefined;
    return ifMatch === undefined ? { output, overwrite } : { output, overwrite, ifMatch };
  });
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
  plan.journal = journalOf(plan);
  if (forced) {
    plan.keep = [...request.outputs.map((output) => output.path), STATE_FILE_NAME, LEASE_FILE_NAME];
    // The clear after the commit removes this owner's old outputs too: journaled, so that a
    // clear cut short leaves them for the next run rather than as unrecorded debris.
    const planned = new Set(request.outputs.map((output) => output.path));
    const retired = [...current].filter((path) => !planned.has(path));
    plan.journal.paths.push(...retired);
  }
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
  plan.nextState = nextStateDocument(request, inspection.status.state, plan.action);
  return plan;
}

/** The owner's records by path (none without a state). */
function recordsByPath(
  owner: OwnerScope,
  document: StateDocument | undefined,
): Map<string, RecordedOutput> {
  const records = document === undefined ? [] : ownedOutputRecords(document, owner);
  return new Map(records.map((record) => [record.path, record]));
}

/** True when `record` already describes `output` exactly: bytes, origin and metadata. */
function recordMatches(record: RecordedOutput | undefined, output: PlannedOutput): boolean {
  return (
    record !== undefined &&
    record.sha256 === output.sha256 &&
    record.size === output.size &&
    record.kind === output.kind &&
    record.sourcePath === output.sourcePath &&
    (record.transform ?? undefined) === (output.transform ?? undefined) &&
    sameMetadata(record.metadata, output.metadata)
  );
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

/** A plan of `decision` that does nothing yet: the steps below fill in what it writes and deletes. */
function emptyPlan(
  request: PublishRequest,
  inspection: DestinationInspection,
  decision: ActionDecision,
  outputs: PublishPlan["outputs"],
  primaryUrl: PublishPlan["primaryUrl"],
): PublishPlan {
  return {
    ...decision,
    bundlePath: request.bundlePath,
    ownerScope: request.owner,
    stateMode: request.stateMode,
    reconciliation: request.reconciliation,
    manifest: request.manifest,
    outputs,
    primaryUrl,
    writes: [],
    deletesFirst: [],
    deletes: [],
    deleteVersions: {},
    clearBundlePath: false,
    keep: [],
    journal: { paths: [], directories: [], overwrites: [] },
    stateVersion: inspection.stateVersion,
    readState: inspection.status.state,
  };
}

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
 * True when writing `output` restores what `record` describes: the same bytes, or, for an output
 * stored encoded, the same bytes before encoding with the same metadata (compressors of other
 * zlib or brotli versions may encode the same input differently; the record then takes the new
 * encoded digest).
 */
function reproduces(output: PlannedOutput, record: RecordedOutput): boolean {
  if (output.sha256 === record.sha256 && output.size === record.size) return true;
  return (
    record.decoded !== undefined &&
    output.decoded !== undefined &&
    record.decoded.sha256 === output.decoded.sha256 &&
    record.decoded.size === output.decoded.size &&
    sameMetadata(output.metadata, record.metadata)
  );
}

type RecordedOutput = {
  path: string;
  kind: OutputKind;
  sourcePath: string;
  transform?: string;
  sha256: string;
  size: number;
  metadata?: OutputMetadata;
  decoded?: DecodedDigest;
};

/**
 * Paths of this owner's recorded outputs (among the planned ones) whose recorded metadata is not
 * what the destination's rules give them now. Pure; reads the state only.
 */
export function metadataChanges(target: PublishTarget, document: StateDocument): string[] {
  if (target.planned === undefined) return [];
  const planned = new Map(target.planned.map((output) => [output.path, output.metadata]));
  const changed: string[] = [];
  for (const record of ownedOutputRecords(document, target.owner)) {
    if (!planned.has(record.path)) continue;
    if (!sameMetadata(record.metadata, planned.get(record.path))) changed.push(record.path);
  }
  return changed;
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

/** The records of `owner` in a state document (none when the state is another owner's). */
function ownedOutputRecords(
  document: StateDocument,
  owner: OwnerScope,
): ReadonlyArray<RecordedOutput> {
  if (isSharedRootState(document)) return ownerOutputs(document, owner);
  return sameOwnerScope(singleOwnerScope(document), owner) ? document.outputs : [];
}

function recordedPrimaryUrl(document: StateDocument, owner: OwnerScope): string | undefined {
  if (!isSharedRootState(document)) return document.links?.primaryUrl;
  return document.owners.find((o) => sameOwnerScope(o.scope, owner))?.links?.primaryUrl;
}

/**
 * The journal of a write plan: paths it writes (and so may create) or will delete, and the
 * directories its temp files may appear in (the bundle path itself holds the state's).
 */
export function journalOf(
  plan: Pick<PublishPlan, "writes" | "deletesFirst" | "deletes">,
): PlanJournal {
  // Overwrites are journaled too: recovery keeps whatever a state records, and a killed upload
  // of any written path leaves multipart parts to abort.
  const paths = [
    ...plan.writes.map((write) => write.output.path),
    ...plan.deletesFirst,
    ...plan.deletes,
  ];
  const directories = new Set([""]);
  for (const write of plan.writes) {
    const dir = posix.dirname(write.output.path);
    directories.add(dir === "." ? "" : dir);
  }
  // Recorded outputs this attempt changes before its commit: replaced in place, or deleted ahead
  // of the writes. Should it die there, recovery checks each against the state.
  const overwrites = [
    ...plan.writes.filter((write) => write.overwrite).map((write) => write.output.path),
    ...plan.deletesFirst,
  ];
  return { paths, directories: [...directories], overwrites };
}

/** The refusals that depend on what is stored, not only on the state comparison. */
function refuse(
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
      reason: `${where} holds more than ${inspection.bundleListingLimit} entries, so it cannot be confirmed to hold only managed outputs`,
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
function ancestorsOf(paths: Iterable<string>): Set<string> {
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
  if (document === undefined) return new Set();
  if (isSharedRootState(document)) {
    return new Set(ownerOutputs(document, owner).map((output) => output.path));
  }
  if (!sameOwnerScope(singleOwnerScope(document), owner)) return new Set();
  return new Set(outputsByPath(document.outputs).keys());
}
