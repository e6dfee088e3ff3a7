// Refuses a package change without a changeset (docs/releasing.md): every published package whose
// `src/` or `package.json` changed since the last release must be named by a pending changeset.
// The last release is the last commit that changed a `packages/*/CHANGELOG.md` (the first commit
// when there is none). Run by `.ci/run`; `node scripts/check-changesets.mjs [--root <dir>]`.
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const git = (root, args) =>
  execFileSync("git", args, {
    cwd: root,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  }).trim();

/** The commit changes are counted from: the last release, or the first commit. */
export function lastRelease(root) {
  const release = git(root, ["log", "-1", "--format=%H", "--", "packages/*/CHANGELOG.md"]);
  if (release !== "") return release;
  return git(root, ["rev-list", "--max-parents=0", "HEAD"]).split("\n").pop() ?? "";
}

/** Package names (`@scope/name`) the pending changesets in `.changeset/` name. */
export function namedPackages(root) {
  const dir = join(root, ".changeset");
  const named = new Set();
  for (const file of readdirSync(dir).filter(
    (name) => name.endsWith(".md") && name !== "README.md",
  )) {
    const text = readFileSync(join(dir, file), "utf8");
    const front = /^---\n([\s\S]*?)\n---/.exec(text)?.[1] ?? "";
    for (const line of front.split("\n")) {
      const match = /^\s*["']?([^"':]+)["']?\s*:\s*(major|minor|patch|none)\s*$/.exec(line);
      if (match?.[1]) named.add(match[1]);
    }
  }
  return named;
}

/** Published packages whose sources or manifest changed since `since`, as `{ dir, name }`. */
export function changedPackages(root, since) {
  const changed = [];
  for (const dir of readdirSync(join(root, "packages")).sort()) {
    const manifestPath = join(root, "packages", dir, "package.json");
    if (!statSync(manifestPath, { throwIfNoEntry: false })) continue;
    const manifest = JSON.parse(readFileSync(manifestPath, "utf8"));
    if (manifest.private) continue;
    const paths = [`packages/${dir}/src`, `packages/${dir}/package.json`];
    if (git(root, ["diff", "--name-only", since, "HEAD", "--", ...paths]) !== "") {
      changed.push({ dir, name: manifest.name });
    }
  }
  return changed;
}

/** The packages that changed since the last release without a changeset naming them. */
export function missingChangesets(root) {
  const since = lastRelease(root);
  const named = namedPackages(root);
  return { since, missing: changedPackages(root, since).filter(({ name }) => !named.has(name)) };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const at = process.argv.indexOf("--root");
  const root = at > 0 ? process.argv[at + 1] : fileURLToPath(new URL("../", import.meta.url));
  const { since, missing } = missingChangesets(root);
  for (const { dir, name } of missing) {
    console.log(
      `${name} (packages/${dir}) changed since ${since.slice(0, 12)} without a changeset: run pnpm changeset`,
    );
  }
  console.log(
    missing.length === 0
      ? `changesets: every package changed since ${since.slice(0, 12)} has one`
      : `changesets: ${missing.length} package(s) without one`,
  );
  process.exitCode = missing.length === 0 ? 0 : 1;
}
