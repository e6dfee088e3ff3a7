import { availableParallelism } from "node:os";
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    projects: [
      "packages/*",
      // Checks of the repository as a whole: the layout every package keeps, changesets.
      { test: { name: "repository", include: ["test/repository/**/*.test.ts"] } },
    ],
    // Vitest's default is one worker fewer than the cores: one on a 2-core machine. Most suites
    // wait on real servers, child processes and timeouts rather than on the CPU, so two files at a
    // time at least (docs/decisions.md, "Test run time").
    maxWorkers: Math.max(2, availableParallelism() - 1),
  },
});
