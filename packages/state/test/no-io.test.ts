import { readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

/**
 * The state package is pure: parsing, validation, comparison and planning take data and return
 * data. Reading and writing `.distributor.json` belongs to the publish engine.
 */
const FORBIDDEN: [RegExp, string][] = [
  [/from\s+["'](node:)?fs(\/promises)?["']/, "imports the file system"],
  [/import\(\s*["'](node:)?fs(\/promises)?["']\s*\)/, "imports the file system"],
  [/require\(\s*["'](node:)?fs(\/promises)?["']\s*\)/, "requires the file system"],
  [
    /\.(readFile|openReader|openRead|writeFile|stat|walk|hasAny|deletePaths|deletePrefix|close)\s*\(/,
    "calls a storage backend method",
  ],
  [/\bStorageBackend\b/, "refers to the storage backend interface"],
  [/\b(async|await)\b/, "does asynchronous work"],
];

export function ioProblems(source: string): string[] {
  return FORBIDDEN.filter(([pattern]) => pattern.test(source)).map(([, problem]) => problem);
}

describe("src/ does no IO", () => {
  it("no source file imports fs or calls backend methods", () => {
    const dir = new URL("../src/", import.meta.url);
    const files = readdirSync(dir, { recursive: true, encoding: "utf8" }).filter((name) =>
      name.endsWith(".ts"),
    );
    expect(files.length).toBeGreaterThan(5);
    for (const file of files) {
      expect(ioProblems(readFileSync(new URL(file, dir), "utf8")), file).toEqual([]);
    }
  });

  it("the scanner catches each forbidden pattern", () => {
    expect(ioProblems('import { readFileSync } from "node:fs";')).toContain(
      "imports the file system",
    );
    expect(ioProblems("import fs from 'fs/promises';")).toContain("imports the file system");
    expect(ioProblems('const fs = await import("node:fs");')).toContain("imports the file system");
    expect(ioProblems("await backend.writeFile(path, data)")).toContain(
      "calls a storage backend method",
    );
    expect(ioProblems("backend.stat (path)")).toContain("calls a storage backend method");
    expect(ioProblems("function f(b: StorageBackend) {}")).toContain(
      "refers to the storage backend interface",
    );
    expect(ioProblems("const x = parseDocument(text);")).toEqual([]);
  });
});
