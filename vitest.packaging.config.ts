import { defineConfig } from "vitest/config";

// The packaging check (test/packaging): slow and needs the npm registry, so it is not part of
// `pnpm test`; `.ci/run` runs it, and `pnpm test:packaging` runs it by hand.
export default defineConfig({
  test: {
    name: "packaging",
    include: ["test/packaging/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 300_000,
  },
});
