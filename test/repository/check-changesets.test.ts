import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
// @ts-expect-error: a plain ES module of the repository's scripts, without type declarations
import * as check from "../../scripts/check-changesets.mjs";

const { missingChangesets } = check as {
  missingChangesets(root: string): { since: string; missing: { dir: string; name: string }[] };
};

// The CI check that every package changed since the last release has a changeset
// (docs/releasing.md), on a git repository made for it.

const roots: string[] = [];
afterAll(() => {
  for (const root of roots) rmSync(root, { recursive: true, force: true });
});

function repository() {
  const root = mkdtempSync(join(tmpdir(), "changesets-"));
  roots.push(root);
  const git = (...args: string[]) =>
    execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@example.org", ...args], {
      cwd: root,
      stdio: "ignore",
    });
  const write = (path: string, text: string) => {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  };
  const commit = (message: string) => {
    git("add", "-A");
    git("commit", "-q", "-m", message);
  };
  git("init", "-q");
  write("packages/a/package.json", '{"name":"@distributor/a","version":"0.1.0"}\n');
  write("packages/a/src/index.ts", "export const a = 1;\n");
  write("packages/a/CHANGELOG.md", "# @distributor/a\n");
  write("packages/e2e/package.json", '{"name":"@distributor/e2e","private":true}\n');
  write(".changeset/README.md", "changesets\n");
  commit("release");
  return { root, write, commit };
}

describe("a package change needs a changeset", () => {
  it("passes when nothing changed since the release", () => {
    const { root } = repository();
    expect(missingChangesets(root).missing).toEqual([]);
  });

  it("fails for a source change no changeset names, and passes once one does", () => {
    const { root, write, commit } = repository();
    write("packages/a/src/index.ts", "export const a = 2;\n");
    commit("change a");
    expect(missingChangesets(root).missing).toEqual([{ dir: "a", name: "@distributor/a" }]);
    write(".changeset/other.md", '---\n"@distributor/b": patch\n---\n\nb.\n');
    commit("a changeset for another package");
    expect(missingChangesets(root).missing).toHaveLength(1);
    write(".changeset/a.md", '---\n"@distributor/a": minor\n---\n\nA is two.\n');
    commit("its changeset");
    expect(missingChangesets(root).missing).toEqual([]);
  });

  it("needs none for tests, docs or a private package", () => {
    const { root, write, commit } = repository();
    write("packages/a/test/a.test.ts", "// a test\n");
    write("packages/a/README.md", "# a\n");
    write("packages/e2e/test/x.test.ts", "// e2e\n");
    commit("tests and docs");
    expect(missingChangesets(root).missing).toEqual([]);
  });
});
