import { posix } from "node:path";

/** The transform name recorded on generated outputs. */
export const MARKDOWN_TO_HTML = "markdown_to_html";

export type MarkdownMode = "sidecar" | "index";

/** Markdown files above this size are refused: rendering has to hold the whole text in memory. */
export const MAX_MARKDOWN_BYTES = 16 * 1024 * 1024;

/** Extensions rendered as Markdown; the match is case-insensitive. */
export const MARKDOWN_EXTENSION = /\.(md|markdown)$/i;

export function isMarkdownPath(path: string): boolean {
  return MARKDOWN_EXTENSION.test(path);
}

/** Destination path of the HTML rendered from a Markdown source path. */
export function htmlOutputPath(sourcePath: string, mode: MarkdownMode): string {
  const dir = posix.dirname(sourcePath);
  const name =
    mode === "index"
      ? "index.html"
      : `${posix.basename(sourcePath).replace(MARKDOWN_EXTENSION, "")}.html`;
  return dir === "." ? name : `${dir}/${name}`;
}
