// The public surface of @distributor/publish: loading a configuration and the workflows the CLI
// runs, with their options and reports. The planner and the commit protocol are
// @distributor/engine's; the upload service is @distributor/server's.

// Secrets are resolved by the storage package; re-exported for configurations that name them.
export { resolveSecret } from "@distributor/storage";
// Backends
export {
  type BackendFactory,
  type BackendRegistry,
  type OpenBackendOptions,
  openBackend,
} from "./backends/registry.js";
export { remoteBackends } from "./backends/remote.js";
// Configuration
export { parseDuration } from "./config/duration.js";
export { ConfigError, isConfigError } from "./config/errors.js";
export { type LoadConfigOptions, loadConfig, parseConfig } from "./config/load.js";
export type {
  Backend,
  Config,
  DestinationConfig,
  LocalLocation,
  PipelineConfig,
  S3Location,
  ServerConfig,
  SourceConfig,
  SshLocation,
  StorageLocation,
  UploadTokenConfig,
} from "./config/types.js";
// Errors shared by every workflow
export {
  actionErrorCode,
  bundleRefusalCode,
  errorCode,
  errorMessage,
  isPruneError,
  PlanFileError,
  PlanRefusedError,
  PruneError,
  WorkflowError,
} from "./errors.js";
// inspect
export {
  type BundleInspection,
  type InspectReport,
  inspectConfiguredDestination,
  inspectConfiguredSource,
  inspectPath,
  type StateTreeInspection,
} from "./inspect/inspect.js";
export type { ReleaseListing, StateReport } from "./inspect/inspect-state.js";
// Maintenance: audit, adopt, reconcile-state, prune
export { adoptOutputs } from "./maintenance/adopt.js";
export type { AdoptOptions, AdoptReport } from "./maintenance/adopt-types.js";
export { audit } from "./maintenance/audit.js";
export type { AuditEvent, AuditOptions, AuditReport } from "./maintenance/audit-types.js";
export { type PromoteOptions, promote } from "./maintenance/promote.js";
export { prune } from "./maintenance/prune/prune.js";
export type { PruneOptions, PruneReport } from "./maintenance/prune/types.js";
export {
  type ReconcileStateOptions,
  type ReconcileStateReport,
  reconcileState,
} from "./maintenance/reconcile-state.js";
export {
  type RollbackOptions,
  type RollbackReport,
  rollback,
} from "./maintenance/rollback.js";
// Saved plans: apply and the plan file
export { type ApplyOptions, applyPlan, DEFAULT_MAX_PLAN_AGE_MS } from "./plan-file/apply.js";
export { encodePlan, loadPlan, parsePlan, savePlan } from "./plan-file/codec.js";
export {
  PLAN_FORMAT_VERSION,
  pipelineConfigDigest,
  type SavedPlan,
  type SavedPlanEntry,
} from "./plan-file/saved-plan.js";
// run, and run --plan-out
export { type PlanRunOptions, type PlanRunResult, planRun } from "./run/plan-run.js";
export { run, runSucceeded, stage } from "./run/run.js";
export type {
  RunActionReport,
  RunActionWarning,
  RunEvent,
  RunOptions,
  RunReport,
  RunStatus,
} from "./run/types.js";
// Options every workflow accepts
export type { WorkflowOptions } from "./shared/workflow-options.js";
// validate, manifest create, signatures
export type { IssueReport } from "./validate/bundle-checks.js";
export {
  type CreateManifestWorkflowOptions,
  createManifestWorkflow,
  type ManifestCreateReport,
} from "./validate/manifest-create.js";
export { signatureCode, signaturePolicy } from "./validate/signatures.js";
export {
  type BundleValidationReport,
  type ValidateEvent,
  type ValidateReport,
  validateBundlePath,
  validateConfiguredSource,
} from "./validate/validate.js";
