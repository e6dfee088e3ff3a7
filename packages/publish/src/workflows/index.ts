export {
  type BundleInspection,
  type BundleTreeInspection,
  type InspectConfiguredDestinationOptions,
  type InspectConfiguredSourceOptions,
  type InspectedFile,
  type InspectedFileStatus,
  type InspectPathOptions,
  type InspectReport,
  inspectBundlePath,
  inspectConfiguredDestination,
  inspectConfiguredSource,
  inspectPath,
  inspectStatePath,
  type StateTreeInspection,
} from "./inspect.js";
export type {
  LeaseWithoutState,
  StateOutputReport,
  StateOwnerReport,
  StateReport,
} from "./inspect-state.js";
export { openLocalDirectory } from "./local-directory.js";
export {
  type CreateManifestWorkflowOptions,
  createManifestWorkflow,
  type ManifestCreateReport,
} from "./manifest-create.js";
export { remoteBackends } from "./remote-backends.js";
export {
  type BackendFactory,
  type BackendRegistry,
  bundlePrefix,
  defaultBackends,
  findDestination,
  findPipeline,
  type OpenBackendOptions,
  openBackend,
  sourceLocation,
  WorkflowError,
  type WorkflowOptions,
  withBackend,
} from "./shared.js";
export {
  type BundleValidationReport,
  type IssueReport,
  type ValidateBundlePathOptions,
  type ValidateConfiguredSourceOptions,
  type ValidateEvent,
  type ValidateReport,
  type ValidationRules,
  validateBundlePath,
  validateConfiguredSource,
  validationRules,
} from "./validate.js";
