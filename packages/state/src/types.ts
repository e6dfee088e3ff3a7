import type { Manifest } from "@distributor/bundle";
import type { ReleaseState } from "./release.js";

/** Schema written for `state.mode: single_owner`. */
export const SINGLE_OWNER_SCHEMA_VERSION = 2;
/** Schema written for `state.mode: shared_root`. */
export const SHARED_ROOT_SCHEMA_VERSION = 3;
/** Read-only legacy single-owner schema; normalised to schema 2 when read. */
export const LEGACY_SCHEMA_VERSION = 1;

export type StateMode = "single_owner" | "shared_root";
export type ReconciliationMode = "replace" | "merge";
export type OutputKind = "source" | "generated";

export const STATE_MODES: readonly StateMode[] = ["single_owner", "shared_root"];
export const RECONCILIATION_MODES: readonly ReconciliationMode[] = ["replace", "merge"];
export const OUTPUT_KINDS: readonly OutputKind[] = ["source", "generated"];

/** `state` object of a document. */
export interface StatePolicy<Mode extends StateMode = StateMode> {
  mode: Mode;
}

/** `reconciliation` object of a single-owner document or a shared-root owner. */
export interface ReconciliationPolicy {
  mode: ReconciliationMode;
}

/** `source` object: the source bundle manifest that was published. */
export interface SourceState {
  manifest: Manifest;
  /**
   * `signer`: who signed the manifest, when the pipeline checked signatures (`source.signatures`)
   * and the bundle was signed. A distributor extension of the reference schemas: readers that do
   * not know it ignore it, as unknown fields are.
   */
  signer?: SourceSigner;
}

/** The allowed_signers line that trusted a bundle's signature, and the signing key. */
export interface SourceSigner {
  /** The principals field of the allowed_signers line. */
  principal: string;
  /** `SHA256:` and the unpadded base64 of the key blob's SHA-256, as `ssh-keygen -l` prints it. */
  fingerprint: string;
}

/** `links` object. Omitted from documents when there is no primary URL. */
export interface LinkState {
  /** Absolute http(s) URL (`primary_url`). */
  primaryUrl: string;
}

/**
 * Object metadata an output was stored with: the fields of the destination's metadata rule that
 * matched it (`metadata[]` in the configuration). Absent fields were not set; a content type
 * absent here is the one the backend infers from the extension.
 */
export interface OutputMetadata {
  cacheControl?: string;
  contentType?: string;
  contentDisposition?: string;
  /** `gzip` or `br`: the stored bytes are the output's bytes compressed so. */
  contentEncoding?: string;
}

/**
 * `replacing`: a run is writing at this state's bundle path — replacing recorded outputs in
 * place, deleting them, or creating new ones — and is not done yet, so the records beside it may
 * not describe what is stored. Written with a compare-and-swap before the run's first write and
 * gone once it is done, or with the recovery of a run that died; a reader that finds it must not
 * trust the records it covers (a skip waits for the lease instead). A distributor extension of
 * the reference schemas: readers that do not know it ignore it, as unknown fields are.
 */
export interface ReplacementMarker {
  /** The run id of the lease the writing run holds. */
  runId: string;
  startedAt: Date;
}

/** Digest and size of an output's bytes before they were encoded for storage. */
export interface DecodedDigest {
  sha256: string;
  size: number;
}

/** A planned output as the publish planner describes it, before it gets timestamps. */
export interface OutputProjection {
  /** Logical path relative to the destination bundle path. */
  path: string;
  kind: OutputKind;
  /** Bundle-relative path of the source file the output came from. */
  sourcePath: string;
  /** Transform id; required for `generated` outputs. */
  transform?: string;
  /** Absolute http(s) URL of the output. */
  url?: string;
  /**
   * `sha256:` + 64 lowercase hex digits of the bytes stored at the path (for an encoded output,
   * the encoded bytes: what an audit reads back).
   */
  sha256: string;
  /** Size in bytes of what is stored at the path. */
  size: number;
  /** Object metadata stored with the output; absent when no rule set any. */
  metadata?: OutputMetadata;
  /** Set exactly when `metadata.contentEncoding` is: the output's bytes before encoding. */
  decoded?: DecodedDigest;
}

/** One managed output path of a single-owner document (`outputs[]`). */
export interface OutputRecord extends OutputProjection {
  /** When this path was first recorded as managed. */
  createdAt: Date;
  /** When this path was last written or updated in state; prune uses it. */
  updatedAt: Date;
}

/** A `.distributor.json` written for `state.mode: single_owner` (schema 2). */
export interface SingleOwnerState {
  schemaVersion: typeof SINGLE_OWNER_SCHEMA_VERSION;
  /** Diagnostic only, never compared. */
  distributorVersion?: string;
  pipelineId: string;
  destinationId: string;
  publishedAt: Date;
  createdAt: Date;
  updatedAt: Date;
  state: StatePolicy<"single_owner">;
  reconciliation: ReconciliationPolicy;
  source: SourceState;
  links?: LinkState;
  /** Present only while a run writes at this state's bundle path. */
  replacing?: ReplacementMarker;
  /** Under the release layout: the release these records describe (see `ReleaseState`). */
  release?: ReleaseState;
  outputs: OutputRecord[];
}

/** Shared-root owners are keyed by pipeline id and destination id. */
export interface OwnerScope {
  pipelineId: string;
  destinationId: string;
}

/** `owners[]` of a shared-root document: one pipeline/destination pair publishing into the root. */
export interface OwnerRecord {
  scope: OwnerScope;
  reconciliation: ReconciliationPolicy;
  /** The owner's latest published source manifest. */
  source: SourceState;
  links?: LinkState;
  /** Present only while a run of this owner writes at this bundle path. */
  replacing?: ReplacementMarker;
}

/** `outputs[]` of a shared-root document: an output record plus its owner and source identity. */
export interface SharedRootOutputRecord extends OutputRecord {
  owner: OwnerScope;
  sourceId: string;
  sourceDigest: string;
  sourceCreated: Date;
}

/** A `.distributor.json` written for `state.mode: shared_root` (schema 3). */
export interface SharedRootState {
  schemaVersion: typeof SHARED_ROOT_SCHEMA_VERSION;
  distributorVersion?: string;
  /** When the shared-root state was first created; kept across owners' publications. */
  createdAt: Date;
  updatedAt: Date;
  state: StatePolicy<"shared_root">;
  owners: OwnerRecord[];
  outputs: SharedRootOutputRecord[];
}

/** Any parsed state document, discriminated by `schemaVersion` (or `state.mode`). */
export type StateDocument = SingleOwnerState | SharedRootState;

/** A planned path already owned by another shared-root owner. */
export interface PathOwnershipConflict {
  path: string;
  owner: OwnerScope;
}

/** Result of the pure missing-output removal helpers. */
export interface RemovalResult<State> {
  state: State;
  /** True when at least one output record was removed. */
  changed: boolean;
}

export function isSingleOwnerState(document: StateDocument): document is SingleOwnerState {
  return document.schemaVersion === SINGLE_OWNER_SCHEMA_VERSION;
}

export function isSharedRootState(document: StateDocument): document is SharedRootState {
  return document.schemaVersion === SHARED_ROOT_SCHEMA_VERSION;
}
