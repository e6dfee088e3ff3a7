import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, it } from "vitest";
import { useTempDir } from "./helpers.js";
import { PREVIEW, stagingScenario } from "./staging-scenario.js";

// Staged releases through the real CLI on a local destination (see staging-scenario.ts).

const tmp = useTempDir();

describe("staged releases on a local destination", () => {
  it("stages B while A stays live, promotes it, rolls back, and refuses what changed", async () => {
    const source = join(tmp(), "src");
    const root = join(tmp(), "www");
    const config = join(tmp(), "distributor.yml");
    await writeFile(
      config,
      `pipelines:\n  - id: site\n    source: {backend: local, path: ${source}}\n    destinations:\n      - id: www\n        backend: local\n        path: ${root}\n        path_mapping: {mode: fixed}\n        layout: releases\n        releases: {keep: 2, preview_url: "${PREVIEW}"}\n`,
    );
    await stagingScenario({ source, root, config, tmp: tmp(), pages: 400 });
  }, 180_000);
});
