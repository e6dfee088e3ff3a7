export {
  type ActionDecision,
  actionForComparison,
  applyForce,
  DEFAULT_TRANSFER_POLICY,
  isFailAction,
  isWriteAction,
  type PublishAction,
} from "./action.js";
export { PublishPlanError } from "./errors.js";
export { type ExecuteContext, executePublish, PublishExecutionError } from "./execute.js";
export {
  DEFAULT_DESTINATION_WALK_LIMIT,
  type DestinationInspection,
  type InspectDestinationOptions,
  inspectDestination,
  MAX_STATE_BYTES,
  readDestinationStatus,
} from "./inspect.js";
export { outputUrl, type PrimaryPolicy, selectPrimaryUrl } from "./links.js";
export {
  attachUrls,
  type LinkPolicy,
  type OutputKind,
  type OutputPolicy,
  type OutputSelection,
  type PlannedOutput,
  selectOutputs,
} from "./outputs.js";
export { isManagedByOwner, type PublishPlan, type PublishRequest, planPublish } from "./plan.js";
export { type PrepareOutputsOptions, prepareOutputs, type RenderCache } from "./prepare.js";
export { SourceChangedError } from "./verify-stream.js";
