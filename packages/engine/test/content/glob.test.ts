import { describe, expect, it } from "vitest";
import { compileGlob, GlobError, globProblem } from "../../src/content/glob.js";

describe("compileGlob", () => {
  it.each([
    ["**/*.html", "index.html", true],
    ["**/*.html", "a/b/index.html", true],
    ["**/*.html", "a/index.htm", false],
    ["assets/**", "assets/x.js", true],
    ["assets/**", "assets/a/b.js", true],
    ["assets/**", "assets", false],
    ["assets/**", "xassets/a", false],
    ["a/**/b", "a/b", true],
    ["a/**/b", "a/x/y/b", true],
    ["a/**/b", "ab", false],
    ["*.{css,js}", "x.css", true],
    ["*.{css,js}", "x.js", true],
    ["*.{css,js}", "d/x.js", false],
    ["file[0-9].txt", "file3.txt", true],
    ["file[!0-9].txt", "filea.txt", true],
    ["file[!0-9].txt", "file3.txt", false],
    ["**", "a/b/c", true],
    ["a.b", "axb", false],
    ["a+(b)", "a+(b)", true],
    ["?.txt", "a.txt", true],
    ["*.txt", ".hidden.txt", true],
    ["*", "a/b", false],
  ])("%s against %s is %s", (pattern, path, expected) => {
    expect(compileGlob(pattern).matches(path)).toBe(expected);
  });

  it.each([
    ["", "must not be empty"],
    ["/a", "must be relative (no leading /)"],
    ["a/", "must not end with /"],
    ["a//b", "must not contain an empty path segment (//)"],
    ["a/../b", "must not contain a .. segment"],
    ["a**", 'uses ** inside the segment "a**"; ** must be a whole segment'],
    ["[abc", 'has an unclosed [ in "[abc"'],
    ["a]", 'has a ] without its [ in "a]"'],
    ["{a,b", 'has an unclosed { in "{a,b"'],
    ["a}", 'has a } without its { in "a}"'],
    ["a\\b", "must not contain \\ (paths use /)"],
  ])("refuses %j: %s", (pattern, problem) => {
    expect(globProblem(pattern)).toBe(problem);
    expect(() => compileGlob(pattern)).toThrow(GlobError);
  });
});
