// The public surface of @distributor/publish: loading a configuration and the workflows the CLI
// runs, with their options and reports. The planner and the commit protocol are
// @distributor/engine's; the upload service is @distributor/server's.

// Secrets are resolved by the storage package; re-exported for configurations that name them.
export { resolveSecret } from "@distributor/storage";
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
// Maintenance: audit, adopt, reconcile-state, prune
export { type AdoptOptions, type AdoptReport, adoptOutputs } from "./workflows/adopt.js";
// run, and saved plans
export {
  type ApplyOptions,
  applyPlan,
  DEFAULT_MAX_PLAN_AGE_MS,
  PlanRefusedError,
} from "./workflows/apply.js";
export { type AuditEvent, type AuditOptions, type AuditReport, audit } from "./workflows/audit.js";
// Backends and errors shared by every workflow
export { actionErrorCode, errorCode, errorMessage } from "./workflows/errors.js";
// validate, inspect, manifest create
export {
  type BundleInspection,
  type InspectReport,
  inspectConfiguredDestination,
  inspectConfiguredSource,
  inspectPath,
  type StateTreeInspection,
} from "./workflows/inspect.js";
export type { StateReport } from "./workflows/inspect-state.js";
export {
  type CreateManifestWorkflowOptions,
  createManifestWorkflow,
  type ManifestCreateReport,
} from "./workflows/manifest-create.js";
export { type PlanRunOptions, type PlanRunResult, planRun } from "./workflows/plan-run.js";
export {
  isPruneError,
  PruneError,
  type PruneOptions,
  type PruneReport,
  prune,
} from "./workflows/prune.js";
export {
  type ReconcileStateOptions,
  type ReconcileStateReport,
  reconcileState,
} from "./workflows/reconcile-state.js";
export { remoteBackends } from "./workflows/remote-backends.js";
export {
  type RunActionReport,
  type RunEvent,
  type RunOptions,
  type RunReport,
  type RunStatus,
  run,
  runSucceeded,
} from "./workflows/run.js";
export {
  encodePlan,
  loadPlan,
  PLAN_FORMAT_VERSION,
  PlanFileError,
  parsePlan,
  pipelineConfigDigest,
  type SavedPlan,
  type SavedPlanEntry,
  savePlan,
} from "./workflows/saved-plan.js";
export {
  type BackendFactory,
  type BackendRegistry,
  type OpenBackendOptions,
  openBackend,
  WorkflowError,
  type WorkflowOptions,
} from "./workflows/shared.js";
export { signatureCode, signaturePolicy } from "./workflows/signatures.js";
export {
  type BundleValidationReport,
  type IssueReport,
  type ValidateEvent,
  type ValidateReport,
  validateBundlePath,
  validateConfiguredSource,
} from "./workflows/validate.js";
