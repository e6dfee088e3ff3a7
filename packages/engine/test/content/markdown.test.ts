import { describe, expect, it } from "vitest";
import { renderMarkdownDocument } from "../../src/content/markdown.js";
import { htmlOutputPath, isMarkdownPath } from "../../src/content/markdown-paths.js";

describe("markdown paths", () => {
  it("recognises .md and .markdown in any case", () => {
    expect(isMarkdownPath("a/report.md")).toBe(true);
    expect(isMarkdownPath("REPORT.MD")).toBe(true);
    expect(isMarkdownPath("notes.Markdown")).toBe(true);
    expect(isMarkdownPath("report.mdx")).toBe(false);
    expect(isMarkdownPath("report.txt")).toBe(false);
  });

  it("maps sidecar and index outputs", () => {
    expect(htmlOutputPath("report.md", "sidecar")).toBe("report.html");
    expect(htmlOutputPath("docs/Guide.MARKDOWN", "sidecar")).toBe("docs/Guide.html");
    expect(htmlOutputPath("report.md", "index")).toBe("index.html");
    expect(htmlOutputPath("docs/guide.md", "index")).toBe("docs/index.html");
  });
});

describe("renderMarkdownDocument", () => {
  it("produces a complete document titled by the first level-1 heading", () => {
    const html = renderMarkdownDocument(
      "Intro\n\n## Sub\n\n# The *Report* & more\n\nText.\n",
      "r.md",
    );
    expect(html.startsWith('<!doctype html>\n<html>\n<head>\n<meta charset="utf-8">')).toBe(true);
    expect(html).toContain("<title>The Report &amp; more</title>");
    expect(html).toContain("<h1>The <em>Report</em> &#x26; more</h1>");
    expect(html.endsWith("</body>\n</html>\n")).toBe(true);
  });

  it("falls back to the file stem for the title", () => {
    expect(renderMarkdownDocument("## Only a subheading\n", "dir/weekly.md")).toContain(
      "<title>weekly</title>",
    );
  });

  it("renders GitHub-flavoured tables, strikethrough and autolinks", () => {
    const html = renderMarkdownDocument(
      "| a | b |\n| - | - |\n| 1 | 2 |\n\n~~old~~ see https://example.com\n",
      "t.md",
    );
    expect(html).toContain("<table>");
    expect(html).toContain("<td>1</td>");
    expect(html).toContain("<del>old</del>");
    expect(html).toContain('<a href="https://example.com">https://example.com</a>');
  });

  it("keeps raw HTML out of the title", () => {
    expect(renderMarkdownDocument("# Home <b>bold</b> page\n", "x.md")).toContain(
      "<title>Home bold page</title>",
    );
  });

  it("does not pass raw HTML through", () => {
    const html = renderMarkdownDocument(
      '# T\n\n<script>alert(1)</script>\n\n<img src="x" onerror="alert(2)">\n\n[x](javascript:alert(3))\n',
      "t.md",
    );
    expect(html).not.toContain("<script");
    expect(html).not.toContain("onerror");
    expect(html).not.toContain("javascript:");
  });
});
