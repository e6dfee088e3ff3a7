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
