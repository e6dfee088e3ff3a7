// Planning: what a publication of one bundle at one destination bundle path would write.

export {
  MAX_PUBLISH_ATTEMPTS,
  type PublishTargetOptions,
  publishTarget,
} from "./execute/commit.js";
export {
  type ExecuteContext,
  type LeaseGuard,
  PublishExecutionError,
} from "./execute/context.js";
export { AmbiguousCommitError, executePublish, StateChangedError } from "./execute/execute.js";
export { DEFAULT_RENDER_CACHE_BYTES, RenderCache } from "./execute/render-cache.js";
export {
  type StoredFile,
  storedFile,
  storedMetadataMatches,
  storedStatus,
} from "./execute/stored-digest.js";
export { SourceChangedError } from "./execute/verify-source.js";
export {
  type ActionDecision,
  actionForComparison,
  applyForce,
  DEFAULT_TRANSFER_POLICY,
  isFailAction,
  isWriteAction,
  type OnConflict,
  type OnDestinationNewer,
  type OnDestinationOlder,
  type OnDestinationSame,
  type PublishAction,
  type TransferPolicy,
} from "./plan/action.js";
export { completenessGaps } from "./plan/completeness.js";
export { decideAction, needsBundleListing } from "./plan/decide.js";
export { LayoutMismatchError, PublishPlanError } from "./plan/errors.js";
export { compileGlob, type Glob, GlobError, globProblem } from "./plan/glob.js";
export {
  DEFAULT_DESTINATION_WALK_LIMIT,
  type InspectDestinationOptions,
  inspectDestination,
} from "./plan/inspect.js";
export { journalOf } from "./plan/journal.js";
export { outputUrl, type PrimaryPolicy, selectPrimaryUrl } from "./plan/links.js";
export {
  CONTENT_ENCODINGS,
  type ContentEncoding,
  type MetadataRule,
  MetadataRules,
  sameMetadata,
} from "./plan/metadata.js";
export {
  attachUrls,
  type LinkPolicy,
  type OutputKind,
  type OutputPolicy,
  type OutputSelection,
  type PlannedOutput,
  selectOutputs,
  withMetadata,
} from "./plan/outputs.js";
export { planPublish, planPublishSteps } from "./plan/plan.js";
export { type PlanTargetOptions, planTarget } from "./plan/plan-target.js";
export type {
  DestinationInspection,
  PlanJournal,
  PlannedWrite,
  PublishPlan,
  PublishRequest,
  PublishTarget,
} from "./plan/plan-types.js";
export { type PrepareOutputsOptions, prepareOutputs } from "./plan/prepare.js";
export { metadataChanges } from "./plan/records.js";
export { planMetadataUpdate } from "./plan/repair.js";
// The lease is the commit protocol's own: its records, journal and recovery stay internal. What
// a caller may meet are its errors and its report (`inspect` shows a lease found at a path).
export {
  DEFAULT_LEASE_TTL_MS,
  defaultProcessAlive,
  LeaseHeldError,
  LeaseLostError,
  type LeaseOptions,
  type LeaseReport,
  LeaseTooLargeError,
  readLease,
} from "./protocol/lease-file.js";
export {
  DEFAULT_DESTINATION_LIMITS,
  type DestinationLimit,
  type DestinationLimits,
  formatBytes,
  type LimitSetting,
  MAX_READABLE_STATE_BYTES,
  walkWithin,
} from "./protocol/limits.js";
export { adoptedStateDocument, nextStateDocument } from "./protocol/next-state.js";
export type { RecoveryReport } from "./protocol/recovery.js";
export {
  type DestinationStateRead,
  isStateFile,
  MAX_STATE_BYTES,
  readDestinationStatus,
  readStateFile,
  type StateFile,
  StateTooLargeError,
} from "./protocol/state-file.js";
export {
  type DeleteAfterOptions,
  type PreparedState,
  type StateTransaction,
  type StateTransactionOptions,
  type TransactionJournal,
  withStateTransaction,
} from "./protocol/transaction.js";
export {
  type CheckReleaseOptions,
  checkRelease,
  describeDrift,
  type ReleaseCheck,
  releaseIntact,
} from "./release/identities.js";
export { checkKeptReleases } from "./release/kept-releases.js";
export {
  assertLayout,
  CURRENT_LINK,
  DEFAULT_RELEASES_KEPT,
  liveRelease,
  RELEASES_DIRECTORY,
  storedLayout,
} from "./release/layout.js";
export { publishRelease, type ReleaseLayout } from "./release/publish-release.js";
export { ReleaseRefusedError } from "./release/refused.js";
export {
  listReleases,
  type ReleaseSummary,
  type RollbackOptions,
  type RollbackResult,
  rollbackRelease,
} from "./release/rollback.js";
export { stagedReleases } from "./release/staged.js";
export { ReleaseView } from "./release/view.js";
export {
  htmlOutputPath,
  isMarkdownPath,
  MARKDOWN_TO_HTML,
  MAX_MARKDOWN_BYTES,
  type MarkdownMode,
} from "./transform/markdown-paths.js";
