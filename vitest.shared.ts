import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { defineProject, type UserWorkspaceConfig } from "vitest/config";

const packagesDir = fileURLToPath(new URL("./packages/", import.meta.url));

/** Subpaths whose source is not `src/<subpath>/index.ts`. */
const SPECIAL_SUBPATHS: Record<string, string> = {
  "storage/adapter": "storage/src/adapter.ts",
  "upload-client/wire": "upload-client/src/wire.ts",
  "upload-store/wire": "upload-store/src/wire.ts",
};

/** The workspace packages `name` declares (any kind of dependency), and itself. */
function declaredWorkspacePackages(name: string): string[] {
  const manifest = JSON.parse(readFileSync(`${packagesDir}${name}/package.json`, "utf8")) as {
    dependencies?: Record<string, string>;
    devDependencies?: Record<string, string>;
    peerDependencies?: Record<string, string>;
  };
  const declared = new Set([name]);
  for (const list of [manifest.dependencies, manifest.devDependencies, manifest.peerDependencies]) {
    for (const dependency of Object.keys(list ?? {})) {
      if (dependency.startsWith("@distributor/"))
        declared.add(dependency.slice("@distributor/".length));
    }
  }
  return [...declared].sort();
}

/**
 * Tests import the workspace packages their package declares from their sources, so a change in
 * one package is seen by the others without a rebuild; a package it does not declare is not
 * aliased, and importing it fails as it would for a published consumer. Published consumers
 * resolve the built `dist` through `exports`.
 */
export function sourceAliases(name: string) {
  const declared = declaredWorkspacePackages(name);
  const names = declared.join("|");
  return [
    ...Object.entries(SPECIAL_SUBPATHS)
      .filter(([subpath]) => declared.includes(subpath.split("/")[0] ?? ""))
      .map(([subpath, file]) => ({
        find: new RegExp(`^@distributor/${subpath}$`),
        replacement: `${packagesDir}${file}`,
      })),
    {
      find: new RegExp(`^@distributor/(${names})/([a-z/]+)$`),
      replacement: `${packagesDir}$1/src/$2/index.ts`,
    },
    { find: new RegExp(`^@distributor/(${names})$`), replacement: `${packagesDir}$1/src/index.ts` },
  ];
}

export function packageProject(name: string, test: UserWorkspaceConfig["test"] = {}) {
  return defineProject({
    resolve: { alias: sourceAliases(name) },
    test: {
      name,
      include: ["src/**/*.test.ts", "test/**/*.test.ts"],
      testTimeout: 20_000,
      ...test,
    },
  });
}
