// The renderer pulls in the whole unified/remark tree (hundreds of modules), so it lives apart
// from the path rules and is imported only by runs that render.
import { posix } from "node:path";
import remarkGfm from "remark-gfm";
import remarkHtml from "remark-html";
import remarkParse from "remark-parse";
import { unified } from "unified";
import { MARKDOWN_EXTENSION } from "./markdown-paths.js";

interface MdastNode {
  type: string;
  depth?: number;
  value?: string;
  alt?: string | null;
  children?: MdastNode[];
}

function textOf(node: MdastNode): string {
  // Raw HTML never reaches the page, so it does not reach the title either.
  if (node.type === "html") return "";
  if (typeof node.value === "string") return node.value;
  if (node.type === "image") return node.alt ?? "";
  return (node.children ?? []).map(textOf).join("");
}

function firstHeadingText(root: MdastNode): string | undefined {
  for (const child of root.children ?? []) {
    if (child.type === "heading" && child.depth === 1) {
      const text = textOf(child).replace(/\s+/g, " ").trim();
      if (text !== "") return text;
    }
  }
  return undefined;
}

function escapeHtml(text: string): string {
  return text
    .replaceAll("&", "&amp;")
    .replaceAll("<", "&lt;")
    .replaceAll(">", "&gt;")
    .replaceAll('"', "&quot;");
}

const processor = unified().use(remarkParse).use(remarkGfm).use(remarkHtml, { sanitize: true });

/**
 * Renders Markdown to a complete UTF-8 HTML document. GitHub-flavoured Markdown is on; raw HTML
 * in the source is sanitised away. The title is the first level-1 heading, else the file stem.
 */
export function renderMarkdownDocument(markdown: string, sourcePath: string): string {
  const tree = processor.parse(markdown) as MdastNode;
  const body = processor.stringify(processor.runSync(tree as never) as never) as string;
  const stem = posix.basename(sourcePath).replace(MARKDOWN_EXTENSION, "");
  const title = firstHeadingText(tree) ?? stem;
  return [
    "<!doctype html>",
    "<html>",
    "<head>",
    '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    `<title>${escapeHtml(title)}</title>`,
    "</head>",
    "<body>",
    body.trimEnd(),
    "</body>",
    "</html>",
    "",
  ].join("\n");
}
