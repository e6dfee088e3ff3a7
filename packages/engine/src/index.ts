// Planning: what a publication of one bundle at one destination bundle path would write.

export { compileGlob, type Glob, GlobError, globProblem } from "./content/glob.js";
export { MAX_MARKDOWN_BYTES, type MarkdownMode } from "./content/markdown-paths.js";
export { type ContentEncoding, type MetadataRule, MetadataRules } from "./content/metadata.js";
export { RenderCache } from "./content/render-cache.js";
export {
  type StoredFile,
  storedFile,
  storedMetadataMatches,
  storedStatus,
} from "./content/stored-digest.js";
export { SourceChangedError } from "./content/verify-source.js";
export { type PublishTargetOptions, publishTarget } from "./execute/commit.js";
export { type ExecuteContext, PublishExecutionError } from "./execute/context.js";
export { AmbiguousCommitError, StateChangedError } from "./execute/execute.js";
export {
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
export { LayoutMismatchError, PublishPlanError } from "./plan/errors.js";
export { type InspectDestinationOptions, inspectDestination } from "./plan/inspect.js";
export type { PrimaryPolicy } from "./plan/links.js";
export { adoptedStateDocument } from "./plan/next-state.js";
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
  PlannedWrite,
  PublishPlan,
  PublishRequest,
  PublishTarget,
} from "./plan/plan-types.js";
export { type PrepareOutputsOptions, prepareOutputs } from "./plan/prepare.js";
// The lease is the commit protocol's own: its records, journal and recovery stay internal. What
// a caller may meet are its errors and its report (`inspect` shows a lease found at a path).
export {
  defaultProcessAlive,
  LeaseHeldError,
  LeaseLostError,
  type LeaseOptions,
  type LeaseReport,
  LeaseTooLargeError,
  readLease,
} from "./protocol/lease-file.js";
export type { LeaseGuard } from "./protocol/lease-guard.js";
export {
  DEFAULT_DESTINATION_LIMITS,
  type DestinationLimit,
  type DestinationLimits,
  formatBytes,
  type LimitSetting,
  MAX_READABLE_STATE_BYTES,
  walkWithin,
} from "./protocol/limits.js";
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
export { type CheckReleaseOptions, checkRelease, type ReleaseCheck } from "./release/identities.js";
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
