import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { loadConfig, parseConfig } from "../../src/config/index.js";

const repositoryRoot = fileURLToPath(new URL("../../../../", import.meta.url));
const examples = readdirSync(`${repositoryRoot}examples`).filter((name) => name.endsWith(".yml"));

describe("example configurations", () => {
  it("has examples to check", () => {
    expect(examples.length).toBeGreaterThan(0);
  });

  it.each(examples)("examples/%s loads", async (name) => {
    const config = await loadConfig(`examples/${name}`, { cwd: repositoryRoot, env: {} });
    expect(config.pipelines.length).toBeGreaterThan(0);
  });
});

describe("docs/config.md", () => {
  const reference = readFileSync(`${repositoryRoot}docs/config.md`, "utf8");

  it("has a complete example that loads", () => {
    const section = reference.split("## A complete example")[1] ?? "";
    const example = /```yaml\n([\s\S]*?)```/.exec(section)?.[1];
    expect(example).toBeDefined();
    const config = parseConfig(example ?? "", { env: {} });
    expect(config.pipelines.map((pipeline) => pipeline.id)).toEqual([
      "reports",
      "uploaded-reports",
    ]);
    expect(config.pipelines[0]?.destinations.map((destination) => destination.id)).toEqual([
      "archive",
      "site",
      "latest",
    ]);
  });
});
