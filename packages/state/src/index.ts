// The formats of `.distributor.json` (schemas 1, 2 and 3), and what compares and prunes them;
// why they look as they do: docs/design/state-formats.md.
export {
  COMPARISON_OUTCOMES,
  type CompareOptions,
  type Comparison,
  type ComparisonOutcome,
  compare,
  compareManifests,
  compareSharedRootOwner,
  type DestinationStatus,
  type PathMappingMode,
} from "./compare.js";
export { manifestsEqual } from "./embedded-manifest.js";
export { StateError } from "./errors.js";
export {
  findOutputByPath,
  hasMetadata,
  managedOutputPaths,
  mergeByPath,
  mergeOutputRecords,
  outputRecord,
  projectOutputs,
  removeMissingOutputs,
  sameStoredForm,
} from "./outputs.js";
export {
  type ParseOptions,
  parseDocument,
  parseDocumentSteps,
  parseSharedRootState,
  parseSingleOwnerState,
} from "./parse.js";
export {
  type PruneCandidate,
  type PrunePlan,
  type PrunePlanOptions,
  planPrune,
  pruneCandidatesForDocument,
  sharedRootPruneCandidates,
  singleOwnerPruneCandidates,
} from "./prune.js";
export {
  isReleaseId,
  newReleaseId,
  peekReplacementMarker,
  peekSingleOwner,
  peekSourceDigest,
  peekStateRelease,
  RELEASE_ID_PATTERN,
  type ReleaseState,
} from "./release.js";
export {
  replacementMarker,
  replacementMarkers,
  withoutReplacementMarkers,
  withReplacementMarker,
} from "./replacing.js";
export {
  assertSingleOwnerScope,
  formatOwnerScope,
  ownerScope,
  sameOwnerScope,
  singleOwnerScope,
} from "./scope.js";
export {
  encodeDocument,
  encodeDocumentSteps,
  serializeDocument,
  serializeSharedRootState,
  serializeSingleOwnerState,
} from "./serialize.js";
export {
  allManagedOutputPaths,
  findOwner,
  mergeOwnerOutputs,
  newSharedRootState,
  otherOwnerOutputs,
  outputOwner,
  ownerManagedOutputPaths,
  ownerOutputs,
  ownerSourceManifest,
  pathOwnershipConflict,
  projectOwnerOutputs,
  removeMissingOwnerOutputs,
  removeMissingSharedRootOutputs,
  replaceOwnerOutputs,
  singleOwnerAsOwnerOutputs,
  singleOwnerAsOwnerRecord,
} from "./shared-root.js";
export { runSteps, STEP_RECORDS, type Steps } from "./steps.js";
export { formatStateTimestamp, truncateToSecond } from "./time.js";
export {
  type DecodedDigest,
  isSharedRootState,
  isSingleOwnerState,
  LEGACY_SCHEMA_VERSION,
  type LinkState,
  OUTPUT_KINDS,
  type OutputKind,
  type OutputMetadata,
  type OutputProjection,
  type OutputRecord,
  type OwnerRecord,
  type OwnerScope,
  type PathOwnershipConflict,
  RECONCILIATION_MODES,
  type ReconciliationMode,
  type ReconciliationPolicy,
  type RemovalResult,
  type ReplacementMarker,
  SHARED_ROOT_SCHEMA_VERSION,
  type SharedRootOutputRecord,
  type SharedRootState,
  SINGLE_OWNER_SCHEMA_VERSION,
  type SingleOwnerState,
  type SourceSigner,
  type SourceState,
  STATE_MODES,
  type StateDocument,
  type StateMode,
  type StatePolicy,
} from "./types.js";
export {
  sharedRootProblem,
  singleOwnerProblem,
  validateSharedRootState,
  validateSingleOwnerState,
  validateState,
} from "./validate.js";
