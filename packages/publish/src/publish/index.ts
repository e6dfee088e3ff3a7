export {
  type ActionDecision,
  actionForComparison,
  applyForce,
  DEFAULT_TRANSFER_POLICY,
  isFailAction,
  isWriteAction,
  type PublishAction,
} from "./action.js";
export {
  MAX_PUBLISH_ATTEMPTS,
  type PublishTargetOptions,
  publishTarget,
} from "./commit.js";
export { PublishPlanError } from "./errors.js";
export {
  AmbiguousCommitError,
  type ExecuteContext,
  executePublish,
  type LeaseGuard,
  PendingDeletesError,
  PublishExecutionError,
  StateChangedError,
  UncommittedError,
} from "./execute.js";
export { compileGlob, type Glob, GlobError, globProblem } from "./glob.js";
export {
  DEFAULT_DESTINATION_WALK_LIMIT,
  type InspectDestinationOptions,
  inspectDestination,
} from "./inspect.js";
// The lease is the commit protocol's own: its records, journal and recovery stay internal. What
// a caller may meet are its errors and its report (`inspect` shows a lease found at a path).
export {
  DEFAULT_LEASE_TTL_MS,
  LeaseHeldError,
  LeaseLostError,
  type LeaseOptions,
  type LeaseReport,
  LeaseTooLargeError,
} from "./lease.js";
export { outputUrl, type PrimaryPolicy, selectPrimaryUrl } from "./links.js";
export {
  CONTENT_ENCODINGS,
  type ContentEncoding,
  type MetadataRule,
  MetadataRules,
  sameMetadata,
} from "./metadata.js";
export { nextStateDocument } from "./next-state.js";
export {
  attachUrls,
  type LinkPolicy,
  type OutputKind,
  type OutputPolicy,
  type OutputSelection,
  type PlannedOutput,
  selectOutputs,
  withMetadata,
} from "./outputs.js";
export {
  type DestinationInspection,
  decideAction,
  journalOf,
  metadataChanges,
  needsBundleListing,
  type PlanJournal,
  type PlannedWrite,
  type PublishPlan,
  type PublishRequest,
  type PublishTarget,
  planMetadataUpdate,
  planPublish,
} from "./plan.js";
export { type PlanTargetOptions, planTarget } from "./plan-target.js";
export { type PrepareOutputsOptions, prepareOutputs } from "./prepare.js";
export type { RecoveryReport } from "./recovery.js";
export { DEFAULT_RENDER_CACHE_BYTES, RenderCache } from "./render-cache.js";
export {
  type DestinationStateRead,
  MAX_STATE_BYTES,
  readDestinationStatus,
  readStateFile,
  type StateFile,
  StateTooLargeError,
} from "./state-file.js";
export { SourceChangedError } from "./verify-source.js";
