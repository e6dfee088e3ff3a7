import { fileURLToPath } from "node:url";
import { defineProject, type UserWorkspaceConfig } from "vitest/config";

const packagesDir = fileURLToPath(new URL("./packages/", import.meta.url));

/**
 * Tests import sibling workspace packages from their sources, so a change in one package is seen by
 * the others without a rebuild. Published consumers resolve the built `dist` through `exports`.
 */
export const sourceAliases = [
  {
    find: /^@distributor\/storage\/testing$/,
    replacement: `${packagesDir}storage/src/testing/index.ts`,
  },
  {
    find: /^@distributor\/storage\/adapter$/,
    replacement: `${packagesDir}storage/src/adapter.ts`,
  },
  {
    find: /^@distributor\/upload-client\/wire$/,
    replacement: `${packagesDir}upload-client/src/wire.ts`,
  },
  {
    find: /^@distributor\/([a-z0-9-]+)\/([a-z/]+)$/,
    replacement: `${packagesDir}$1/src/$2/index.ts`,
  },
  { find: /^@distributor\/([a-z0-9-]+)$/, replacement: `${packagesDir}$1/src/index.ts` },
];

export function packageProject(name: string, test: UserWorkspaceConfig["test"] = {}) {
  return defineProject({
    resolve: { alias: sourceAliases },
    test: {
      name,
      include: ["src/**/*.test.ts", "test/**/*.test.ts"],
      testTimeout: 20_000,
      ...test,
    },
  });
}
