import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ownerFlags, PREVIEW, stagingScenario } from "../src/testing/index.js";
import { runCli, useTempDir } from "./helpers.js";

// Staged releases through the real CLI on a local destination (see `stagingScenario` in src/testing/staging.ts).

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

  it("refuses promote without exactly one target, and run --stage with --plan-out", async () => {
    const config = join(tmp(), "distributor.yml");
    await writeFile(config, "pipelines: []\n");
    const neither = await runCli(["promote", ...ownerFlags(config)]);
    expect(neither.code).toBe(2);
    expect(neither.stderr).toContain("promote requires exactly one of --to <release> or --latest");
    const both = await runCli(["promote", ...ownerFlags(config), "--latest", "--to", "x"]);
    expect(both.code).toBe(2);
    const planned = await runCli(["run", "--config", config, "--stage", "--plan-out", "p.json"]);
    expect(planned.code).toBe(2);
    expect(planned.stderr).toContain("run accepts --plan-out or --stage, not both");
    const help = await runCli(["promote", "--help"]);
    expect(help.stdout).toContain("Exactly one of --to or --latest is required.");
  });
});
