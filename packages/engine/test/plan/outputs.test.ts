import { buildManifest } from "@distributor/bundle";
import { describe, expect, it } from "vitest";
import { outputUrl, selectPrimaryUrl } from "../../src/plan/links.js";
import { attachUrls, selectOutputs } from "../../src/plan/outputs.js";

const SHA = `sha256:${"0".repeat(64)}`;
const manifest = (paths: string[]) =>
  buildManifest({
    id: "b",
    created: new Date("2026-06-04T11:55:00Z"),
    files: paths.map((path) => ({ path, sha256: SHA, size: 1 })),
  });

describe("selectOutputs", () => {
  it("copies every file and renders Markdown sidecars", () => {
    const selected = selectOutputs(manifest(["a.md", "b/C.MARKDOWN", "d.txt"]), {
      source: true,
      html: true,
      markdownMode: "sidecar",
    });
    expect(selected.map((o) => `${o.kind}:${o.path}<-${o.sourcePath}`)).toEqual([
      "generated:a.html<-a.md",
      "source:a.md<-a.md",
      "source:b/C.MARKDOWN<-b/C.MARKDOWN",
      "generated:b/C.html<-b/C.MARKDOWN",
      "source:d.txt<-d.txt",
    ]);
    expect(selected.find((o) => o.kind === "generated")?.transform).toBe("markdown_to_html");
  });

  it("renders index.html per directory and refuses two Markdown files in one directory", () => {
    const selected = selectOutputs(manifest(["a.md", "docs/guide.md"]), {
      source: false,
      html: true,
      markdownMode: "index",
    });
    expect(selected.map((o) => o.path)).toEqual(["docs/index.html", "index.html"]);
    expect(() =>
      selectOutputs(manifest(["docs/a.md", "docs/b.md"]), {
        source: false,
        html: true,
        markdownMode: "index",
      }),
    ).toThrow(/at most one Markdown file per directory, but docs holds docs\/a\.md, docs\/b\.md/);
  });

  it("fails on a destination output path collision", () => {
    expect(() =>
      selectOutputs(manifest(["report.html", "report.md"]), {
        source: true,
        html: true,
        markdownMode: "sidecar",
      }),
    ).toThrow(/destination output path collision: report\.html/);
  });
});

describe("links", () => {
  it("joins the base URL as a directory with encoded segments", () => {
    expect(outputUrl("https://example.com/archive", "daily/report one.html")).toBe(
      "https://example.com/archive/daily/report%20one.html",
    );
    expect(outputUrl("https://example.com/a/", "x/index.html")).toBe("https://example.com/a/x/");
    expect(outputUrl("https://example.com/a/", "index.html")).toBe("https://example.com/a/");
    expect(outputUrl("https://example.com/", "q?#.txt")).toBe("https://example.com/q%3F%23.txt");
  });

  it("chooses the primary URL by policy", () => {
    const outputs = [
      { path: "index.html", kind: "generated" as const, url: "u:index" },
      { path: "other.html", kind: "generated" as const, url: "u:other" },
      { path: "report.md", kind: "source" as const, url: "u:report" },
    ];
    expect(selectPrimaryUrl(outputs, "html")).toBe("u:index");
    expect(selectPrimaryUrl(outputs, "source")).toBe("u:report");
    expect(selectPrimaryUrl(outputs, "auto")).toBe("u:index");
    expect(selectPrimaryUrl(outputs, "none")).toBeUndefined();
    const noIndex = outputs.filter((o) => o.path !== "index.html");
    expect(selectPrimaryUrl(noIndex, "html")).toBe("u:other");
    const twoSources = [...noIndex, { path: "b.md", kind: "source" as const, url: "u:b" }].filter(
      (o) => o.kind === "source",
    );
    expect(selectPrimaryUrl(twoSources, "auto")).toBeUndefined();
  });

  it("attaches URLs below the bundle path", () => {
    const { outputs, primaryUrl } = attachUrls(
      [{ path: "report.html", kind: "generated", sourcePath: "report.md", sha256: SHA, size: 1 }],
      "daily/2026",
      { baseUrl: "https://r.example/", primary: "auto" },
    );
    expect(outputs[0]?.url).toBe("https://r.example/daily/2026/report.html");
    expect(primaryUrl).toBe("https://r.example/daily/2026/report.html");
  });

  it("copies every output with exactly the fields it has, plus the URL", () => {
    const content = new Uint8Array([1, 2]);
    const prepared = [
      { path: "a.txt", kind: "source" as const, sourcePath: "a.txt", sha256: SHA, size: 1 },
      {
        path: "r.html",
        kind: "generated" as const,
        sourcePath: "r.md",
        transform: "markdown_to_html" as const,
        sha256: SHA,
        size: 2,
        content,
      },
    ];
    const plain = attachUrls(prepared, "b", undefined).outputs;
    expect(plain).toEqual(prepared);
    expect(plain[0]).not.toBe(prepared[0]);
    expect(Object.keys(plain[0] ?? {}).sort()).toEqual([
      "kind",
      "path",
      "sha256",
      "size",
      "sourcePath",
    ]);
    expect(plain[1]?.content).toBe(content);
    const linked = attachUrls(prepared, "b", { baseUrl: "https://r.example/", primary: "auto" });
    expect(linked.outputs.map((output) => output.url)).toEqual([
      "https://r.example/b/a.txt",
      "https://r.example/b/r.html",
    ]);
    expect(linked.outputs[1]).toEqual({ ...prepared[1], url: "https://r.example/b/r.html" });
  });
});
