import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
// @ts-expect-error: a plain ES module of the repository's scripts, without type declarations
import * as layout from "../../scripts/source-layout.mjs";

interface Problem {
  package: string;
  rule: string;
  detail: string;
}
interface Layout {
  PUBLIC_API_FILE: string;
  layoutProblems(root?: string, layers?: Record<string, string[]>): Problem[];
  publicApiText(name: string, root?: string): string;
  packageNames(root?: string): string[];
}
const { PUBLIC_API_FILE, layoutProblems, publicApiText, packageNames } = layout as Layout;

// The layout every package keeps (docs/design/layout.md), checked on the repository itself, and
// each rule shown failing once on a small repository made for it.

describe("the repository's layout", () => {
  it("covers every package", () => {
    expect(packageNames()).toEqual(
      expect.arrayContaining(["cli", "engine", "publish", "server", "storage", "upload-store"]),
    );
  });

  it("keeps every rule", () => {
    const problems = layoutProblems().map((p) => `${p.package}: ${p.rule}: ${p.detail}`);
    expect(problems).toEqual([]);
  });
});

const roots: string[] = [];
afterAll(() => {
  for (const root of roots) rmSync(root, { recursive: true, force: true });
});

/** A repository of `packages/a` and `packages/b` (b depends on nothing), plus `files`. */
function repository(files: Record<string, string | object>): string {
  const root = mkdtempSync(join(tmpdir(), "layout-"));
  roots.push(root);
  const manifest = (name: string, dependencies: Record<string, string> = {}) => ({
    name: `@distributor/${name}`,
    exports: { ".": { types: "./dist/index.d.ts", default: "./dist/index.js" } },
    dependencies,
  });
  const all: Record<string, string | object> = {
    "packages/a/package.json": manifest("a"),
    "packages/a/src/index.ts": 'export { one } from "./one.js";\n',
    "packages/a/src/one.ts": "export const one = 1;\n",
    "packages/b/package.json": manifest("b"),
    "packages/b/src/index.ts": "export const two = 2;\n",
    ...files,
  };
  for (const [path, content] of Object.entries(all)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    const text = typeof content === "string" ? content : `${JSON.stringify(content, null, 2)}\n`;
    writeFileSync(join(root, path), text);
  }
  for (const name of ["a", "b"]) {
    writeFileSync(join(root, "packages", name, PUBLIC_API_FILE), publicApiText(name, root));
  }
  return root;
}

/** The rules broken in `root`, as `package: rule: detail`. */
const broken = (root: string, layers: Record<string, string[]> = {}) =>
  layoutProblems(root, layers).map((p) => `${p.package}: ${p.rule}: ${p.detail}`);

describe("each rule fails once", () => {
  it("a clean repository passes", () => {
    expect(broken(repository({}))).toEqual([]);
  });

  it("folder-layer: a lower folder imports a higher one", () => {
    const root = repository({
      "packages/a/src/low/base.ts":
        'import { top } from "../high/top.js";\nexport const base = top;\n',
      "packages/a/src/high/top.ts": "export const top = 1;\n",
      "packages/a/src/index.ts": 'export { base } from "./low/base.js";\n',
    });
    writeFileSync(join(root, "packages/a", PUBLIC_API_FILE), publicApiText("a", root));
    expect(broken(root, { a: ["low", "high"] })).toEqual([
      "a: folder-layer: low/base.ts -> high/top.ts",
    ]);
    expect(broken(root, { a: ["high", "low"] })).toEqual([]);
  });

  it("import-cycle: two modules that import each other's types", () => {
    const root = repository({
      "packages/a/src/one.ts":
        'import type { Two } from "./two.js";\nexport const one = 1;\nexport type One = Two;\n',
      "packages/a/src/two.ts":
        'import type { One } from "./one.js";\nexport type Two = One | number;\n',
    });
    expect(broken(root)).toEqual(["a: import-cycle: one.ts -> two.ts -> one.ts"]);
  });

  it("long-file: a module over 500 lines", () => {
    const root = repository({
      "packages/a/src/one.ts": `export const one = 1;\n${"//\n".repeat(500)}`,
    });
    expect(broken(root)).toEqual(["a: long-file: one.ts has 501 lines (at most 500)"]);
  });

  it("export-star: an entry point that re-exports everything", () => {
    const root = repository({ "packages/a/src/index.ts": 'export * from "./one.js";\n' });
    writeFileSync(join(root, "packages/a", PUBLIC_API_FILE), publicApiText("a", root));
    expect(broken(root)).toEqual(["a: export-star: index.ts uses export *"]);
  });

  it("undeclared-dependency: a source imports a package it does not declare", () => {
    const root = repository({
      "packages/a/src/one.ts":
        'import { two } from "@distributor/b";\nexport const one = two - 1;\n',
    });
    expect(broken(root)).toEqual([
      "a: undeclared-dependency: src imports @distributor/b, not in dependencies",
    ]);
  });

  it("unused-dependency: a declared package nothing imports", () => {
    const root = repository({
      "packages/a/package.json": {
        name: "@distributor/a",
        exports: { ".": { default: "./dist/index.js" } },
        dependencies: { "@distributor/b": "workspace:^" },
      },
    });
    expect(broken(root)).toEqual([
      "a: unused-dependency: @distributor/b is a dependency that src never imports",
    ]);
  });

  it("test-imports-test: a test reaches into another package's tests", () => {
    const root = repository({
      "packages/b/test/kit.ts": "export const kit = 1;\n",
      "packages/a/test/one.test.ts": 'import { kit } from "../../b/test/kit.js";\nvoid kit;\n',
    });
    expect(broken(root)).toEqual(["a: test-imports-test: test/one.test.ts -> ../../b/test/kit.js"]);
  });

  it("public-api: an export added without updating the committed list", () => {
    const root = repository({});
    writeFileSync(
      join(root, "packages/a/src/index.ts"),
      'export { one } from "./one.js";\nexport type Added = string;\n',
    );
    expect(broken(root)).toEqual([
      `a: public-api: ${PUBLIC_API_FILE} differs from the entry points; run node scripts/source-layout.mjs --write-api`,
    ]);
    expect(publicApiText("a", root)).toContain("  type Added\n  one\n");
  });
});
