export * from "./config/index.js";
export * from "./publish/index.js";
export {
  htmlOutputPath,
  isMarkdownPath,
  MARKDOWN_TO_HTML,
  type MarkdownMode,
  MAX_MARKDOWN_BYTES,
  renderMarkdownDocument,
} from "./transform/markdown.js";
export { errorCode, errorMessage } from "./workflows/errors.js";
export * from "./workflows/index.js";
export {
  type RunActionReport,
  type RunEvent,
  type RunOptions,
  type RunOutputReport,
  type RunPipelineError,
  type RunReport,
  type RunStatus,
  run,
  runSucceeded,
} from "./workflows/run.js";
export {
  formatPruneText,
  formatReconcileStateText,
  type MaintenanceStatus,
  pruneStatus,
  reconcileStateStatus,
} from "./workflows/maintenance-text.js";
export {
  type DestinationPrunePlanOptions,
  isPruneError,
  type PruneEvent,
  PruneError,
  type PruneOptions,
  type PruneOutputRecord,
  type PruneOwnerScope,
  type PrunePlanReport,
  type PruneReport,
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
