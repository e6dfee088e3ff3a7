import type { Manifest } from "@distributor/bundle";
import type {
  DestinationStatus,
  OwnerScope,
  PathMappingMode,
  ReconciliationMode,
  SourceSigner,
  StateDocument,
  StateMode,
} from "@distributor/state";
import type { StorageEntry } from "@distributor/storage";
import type { StoredFile } from "../content/stored-digest.js";
import type { LimitSetting } from "../protocol/limits.js";
import type { PublishAction, TransferPolicy } from "./action.js";
import type { OutputSelection, PlannedOutput } from "./outputs.js";

// The plan as data: what a publication targets, what the planner saw, and what it will do.

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
  /**
   * Under the release layout (`publishRelease`): the id of the release this publication builds,
   * which the next state records. A state that records a release is refused without one, and
   * a state that records none is refused with one: a bundle path keeps the layout it began with.
   */
  release?: string | undefined;
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
  /** Sizes of the files among `existingOutputs`, as the listing or `stat` reported them. */
  existingSizes?: ReadonlyMap<string, number> | undefined;
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
  /** The setting behind `bundleListingLimit`, named in the refusal; absent for a caller's own. */
  bundleListingSetting?: LimitSetting | undefined;
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
  /**
   * Outputs a replacement keeps as they are stored, with the version planning saw: the executor
   * checks them again just before the commit, so that a write landing meanwhile (a stalled run's,
   * say) is never recorded as the new source's bytes.
   */
  keptVersions?: Readonly<Record<string, string>> | undefined;
}
