import { describe, expect, it } from "vitest";
// @ts-expect-error: a plain ES module of the repository's scripts, without type declarations
import * as layout from "../../../scripts/source-layout.mjs";

interface Layout {
  MAX_SOURCE_LINES: number;
  packageNames(): string[];
  importCycles(name: string): string[][];
  longFiles(name: string): { file: string; lines: number }[];
  starExports(name: string): string[];
}
const { MAX_SOURCE_LINES, packageNames, importCycles, longFiles, starExports } = layout as Layout;

// The source layout every package keeps (docs/decisions.md, "Packages along the seams"): a reader
// finds a behaviour from the folder tree, so modules stay small and their imports go one way.
describe("source layout", () => {
  const names = packageNames();

  it("covers every package", () => {
    expect(names).toEqual(
      expect.arrayContaining(["cli", "engine", "publish", "server", "storage"]),
    );
  });

  it.each(names)("%s has no runtime import cycle", (name) => {
    expect(importCycles(name)).toEqual([]);
  });

  it.each(names)(`%s has no source file over ${MAX_SOURCE_LINES} lines`, (name) => {
    expect(longFiles(name)).toEqual([]);
  });

  it.each(names)("%s lists what its entry points export (no export *)", (name) => {
    expect(starExports(name)).toEqual([]);
  });
});
