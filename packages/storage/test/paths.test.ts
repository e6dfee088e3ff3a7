import { posix } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { isStorageError } from "../src/errors.js";
import { STATE_FILE_NAME, statePath } from "../src/names.js";
import {
  compareLogicalPaths,
  displayPath,
  isValidPath,
  isValidPrefix,
  isWithinPrefix,
  join,
  joinEach,
  joinPrefix,
  parentPath,
  pathProblem,
  relativeTo,
  validatePath,
} from "../src/paths.js";

function thrown(call: () => unknown): unknown {
  try {
    call();
  } catch (error) {
    return error;
  }
  throw new Error("expected the call to throw");
}

/** The rules as first written, split and normalised: the single-scan `pathProblem` must agree. */
function referencePathProblem(path: string): string | undefined {
  if (path === "") return "path is empty";
  if (path.includes("\\")) return "path contains a backslash";
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what we reject
  if (/[\u0000-\u001f\u007f]/.test(path)) return "path contains a control character";
  if (path.startsWith("/")) return "path is absolute";
  if (path.endsWith("/")) return "path has a trailing slash";
  for (const segment of path.split("/")) {
    if (segment === "") return "path has an empty segment";
    if (segment === "." || segment === "..") return `path has a "${segment}" segment`;
    if (Buffer.byteLength(segment, "utf8") > 255) return "path segment is longer than 255 bytes";
  }
  if (posix.normalize(path) !== path) return "path is not clean";
  return undefined;
}

describe("logical paths", () => {
  it("agrees with the split-and-normalise rules on arbitrary paths", () => {
    const piece = fc.constantFrom("/", ".", "..", "a", "é", "😀", "\ud800", "\\", "\u0001", " ");
    const long = fc.tuple(
      fc.constantFrom("x", "é", "😀", "\udc00"),
      fc.integer({ min: 60, max: 260 }),
    );
    const path = fc
      .array(
        fc.oneof(
          piece,
          long.map(([unit, count]) => unit.repeat(count)),
        ),
        { maxLength: 8 },
      )
      .map((parts) => parts.join(""));
    fc.assert(
      fc.property(fc.oneof(path, fc.string(), fc.string({ unit: "binary" })), (candidate) => {
        expect(pathProblem(candidate)).toBe(referencePathProblem(candidate));
      }),
      { numRuns: 5_000 },
    );
  });

  it.each([
    ["", "path is empty"],
    ["a\\b", "path contains a backslash"],
    ["a\u0000b", "path contains a control character"],
    ["a\u001fb", "path contains a control character"],
    ["a\u007fb", "path contains a control character"],
    ["/x", "path is absolute"],
    ["a/", "path has a trailing slash"],
    ["a//b", "path has an empty segment"],
    ["a/./b", 'path has a "." segment'],
    ["../x", 'path has a ".." segment'],
    ["x".repeat(256), "path segment is longer than 255 bytes"],
    [`${"é".repeat(128)}`, "path segment is longer than 255 bytes"],
  ])("rejects %j: %s", (path, problem) => {
    expect(pathProblem(path)).toBe(problem);
    expect(isValidPath(path)).toBe(false);
  });

  it.each([
    "a",
    "a/b",
    ".distributor.json",
    "a-b.c",
    "x".repeat(255),
    `${"é".repeat(127)}x`,
    "ü/😀",
  ])("accepts %j", (path) => {
    expect(pathProblem(path)).toBeUndefined();
    expect(isValidPath(path)).toBe(true);
  });

  it("accepts the empty prefix as the root only for prefixes", () => {
    expect(isValidPrefix("")).toBe(true);
    expect(isValidPrefix("a/b")).toBe(true);
    expect(isValidPrefix("a/")).toBe(false);
    expect(isValidPath("")).toBe(false);
  });

  it("reports invalid paths as invalid_path StorageErrors naming operation and backend", () => {
    const error = thrown(() => validatePath("../x", "stat", "local"));
    expect(isStorageError(error, "invalid_path")).toBe(true);
    expect((error as Error).message).toBe('stat local:../x: path has a ".." segment');
    expect(validatePath("a/b")).toBe("a/b");
  });

  it("joins prefixes and paths", () => {
    expect(join("", "a.txt")).toBe("a.txt");
    expect(join("bundle", "nested/a.txt")).toBe("bundle/nested/a.txt");
    expect(joinPrefix("bundle", "")).toBe("bundle");
    expect(joinPrefix("", "")).toBe("");
    expect(
      isStorageError(
        thrown(() => join("bundle", "../a")),
        "invalid_path",
      ),
    ).toBe(true);
    expect(
      isStorageError(
        thrown(() => join("bundle/", "a")),
        "invalid_path",
      ),
    ).toBe(true);
    expect(
      isStorageError(
        thrown(() => join("bundle", "")),
        "invalid_path",
      ),
    ).toBe(true);
  });

  it("builds the state file path", () => {
    expect(STATE_FILE_NAME).toBe(".distributor.json");
    expect(statePath("")).toBe(".distributor.json");
    expect(statePath("reports/daily")).toBe("reports/daily/.distributor.json");
  });

  it("shows the root as .", () => {
    expect(displayPath("")).toBe(".");
    expect(displayPath("a/b")).toBe("a/b");
  });

  it("finds parents", () => {
    expect(parentPath("a")).toBe("");
    expect(parentPath("a/b/c")).toBe("a/b");
  });
});

describe("joined targets", () => {
  it("joinEach joins each path below the prefix", () => {
    expect(joinEach("bundle", ["report.md", "nested/report.html"])).toEqual([
      "bundle/report.md",
      "bundle/nested/report.html",
    ]);
    expect(joinEach("", ["report.md"])).toEqual(["report.md"]);
    expect(joinEach("bundle", [])).toEqual([]);
  });

  it("joinEach keeps the order given, a state file listed last included", () => {
    expect(joinEach("bundle", ["report.md", "nested/report.html", STATE_FILE_NAME])).toEqual([
      "bundle/report.md",
      "bundle/nested/report.html",
      "bundle/.distributor.json",
    ]);
    expect(joinEach("", [STATE_FILE_NAME])).toEqual([".distributor.json"]);
  });

  it("rejects an invalid path or prefix", () => {
    for (const call of [
      () => joinEach("bundle", ["ok.md", "../escape.md"]),
      () => joinEach("bundle", ["/absolute.md", STATE_FILE_NAME]),
      () => joinEach("bundle", ["", STATE_FILE_NAME]),
      () => joinEach("bundle/", ["ok.md"]),
    ]) {
      expect(isStorageError(thrown(call), "invalid_path")).toBe(true);
    }
  });
});

describe("prefix relations", () => {
  it("isWithinPrefix respects segment boundaries", () => {
    expect(isWithinPrefix("", "anything/at/all")).toBe(true);
    expect(isWithinPrefix("bundle", "bundle")).toBe(true);
    expect(isWithinPrefix("bundle", "bundle/a.txt")).toBe(true);
    expect(isWithinPrefix("bundle", "bundle-sibling/a.txt")).toBe(false);
    expect(isWithinPrefix("bundle", "bundle.txt")).toBe(false);
    expect(isWithinPrefix("bundle/a", "bundle")).toBe(false);
  });

  it("relativeTo strips the prefix", () => {
    expect(relativeTo("", "a/b")).toBe("a/b");
    expect(relativeTo("bundle", "bundle")).toBe("");
    expect(relativeTo("bundle", "bundle/nested/a.txt")).toBe("nested/a.txt");
  });
});

describe("compareLogicalPaths", () => {
  it("orders by UTF-8 bytes", () => {
    const paths = ["\u{1f600}", "a/b", "\uff21", "a", "B", "a.b", "a-b", "é"];
    const sorted = [...paths].sort(compareLogicalPaths);
    const byBytes = [...paths].sort((left, right) =>
      Buffer.compare(Buffer.from(left), Buffer.from(right)),
    );
    expect(sorted).toEqual(byBytes);
    expect(sorted).toEqual(["B", "a", "a-b", "a.b", "a/b", "é", "\uff21", "\u{1f600}"]);
  });

  it("agrees with byte order on every pair drawn from boundary code points", () => {
    const alphabet = [
      "a",
      "B",
      "-",
      ".",
      "/",
      "é",
      "\ud7ff",
      "\ue000",
      "\uff21",
      "\uffff",
      "\u{10000}",
      "\u{1f600}",
    ];
    const paths = alphabet.flatMap((first) => alphabet.map((second) => first + second));
    for (const left of paths) {
      for (const right of paths) {
        const expected = Math.sign(Buffer.compare(Buffer.from(left), Buffer.from(right)));
        expect(Math.sign(compareLogicalPaths(left, right)), `${left} vs ${right}`).toBe(expected);
      }
    }
  });

  it("is zero only for equal paths and puts a prefix first", () => {
    expect(compareLogicalPaths("a", "a")).toBe(0);
    expect(compareLogicalPaths("a", "a/b")).toBeLessThan(0);
    expect(compareLogicalPaths("a/b", "a")).toBeGreaterThan(0);
  });
});
