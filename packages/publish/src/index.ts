export * from "@distributor/engine";
export {
  htmlOutputPath,
  isMarkdownPath,
  MARKDOWN_TO_HTML,
  MAX_MARKDOWN_BYTES,
  type MarkdownMode,
} from "@distributor/engine";
export * from "./config/index.js";
export {
  type AdoptBundleReport,
  type AdoptedOutput,
  type AdoptionMode,
  type AdoptOptions,
  type AdoptReport,
  adoptOutputs,
  type UnmatchedOutput,
} from "./workflows/adopt.js";
export {
  type ApplyOptions,
  applyPlan,
  DEFAULT_MAX_PLAN_AGE_MS,
  PlanRefusedError,
} from "./workflows/apply.js";
export {
  AUDIT_WALK_LIMIT,
  type AuditBundleReport,
  type AuditDestinationReport,
  type AuditEvent,
  type AuditOptions,
  type AuditOutputReport,
  type AuditOutputStatus,
  type AuditReport,
  audit,
} from "./workflows/audit.js";
export {
  type ActionError,
  actionError,
  actionErrorCode,
  errorCode,
  errorMessage,
} from "./workflows/errors.js";
export * from "./workflows/index.js";
export { type PlanRunOptions, type PlanRunResult, planRun } from "./workflows/plan-run.js";
export {
  type DestinationPrunePlanOptions,
  isPruneError,
  type PruneBundleRecord,
  PruneError,
  type PruneEvent,
  type PruneOptions,
  type PruneOutputRecord,
  type PruneOwnerScope,
  type PrunePlanReport,
  type PruneReport,
  type PruneWarning,
  planDestinationPrune,
  prune,
} from "./workflows/prune.js";
export {
  RECONCILE_STATE_WALK_LIMIT,
  type ReconcileStateEntry,
  type ReconcileStateOptions,
  type ReconcileStateOwnerScope,
  type ReconcileStatePath,
  type ReconcileStateReport,
  reconcileState,
} from "./workflows/reconcile-state.js";
export {
  type RunActionReport,
  type RunEvent,
  type RunOptions,
  type RunOutputReport,
  type RunPipelineError,
  type RunReport,
  type RunStatus,
  type RunWarning,
  run,
  runSucceeded,
} from "./workflows/run.js";
export {
  configDigest,
  encodePlan,
  loadPlan,
  PLAN_FORMAT_VERSION,
  PlanFileError,
  parsePlan,
  type SavedPlan,
  type SavedPlanEntry,
  type SavedPlanWrite,
  savePlan,
} from "./workflows/saved-plan.js";
