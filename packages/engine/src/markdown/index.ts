// Entry of the `@distributor/engine/markdown` subpath: the Markdown renderer, kept out of the
// main entry so that importing the package does not load unified and remark. The path rules
// (`isMarkdownPath`, `htmlOutputPath`, ...) are exported by the main entry.
export { renderMarkdownDocument } from "../content/markdown.js";
