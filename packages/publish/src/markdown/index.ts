// Entry of the `@distributor/publish/markdown` subpath: the Markdown renderer, kept out of the
// main entry so that importing the package does not load unified and remark.
export { renderMarkdownDocument } from "../transform/markdown.js";
export {
  htmlOutputPath,
  isMarkdownPath,
  MARKDOWN_TO_HTML,
  MAX_MARKDOWN_BYTES,
  type MarkdownMode,
} from "../transform/markdown-paths.js";
