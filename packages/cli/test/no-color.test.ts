import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runCli, useTempDir, writeSpecBundle } from "./helpers.js";

describe("--no-color", () => {
  const dir = useTempDir();

  it.each([
    ["version", ["--no-color", "version"]],
    ["version, flag last", ["version", "--no-color"]],
    ["manifest create", ["manifest", "create", "--no-color", "--help"]],
  ])("is accepted by %s", async (_name, args) => {
    const result = await runCli(args);

    expect(result.code).toBe(0);
    expect(result.stderr).toBe("");
  });

  it("is accepted by a command that runs a workflow, whose output stays plain", async () => {
    await writeSpecBundle(join(dir(), "bundle"));

    const result = await runCli(["validate", "--no-color", join(dir(), "bundle")]);

    expect(result.code).toBe(0);
    expect(result.stdout).toContain("valid");
    expect(result.stdout).not.toContain("\u001b[");
  });

  it("is described in the help of every command", async () => {
    for (const words of [[], ["run"], ["prune"], ["manifest", "create"]]) {
      const result = await runCli([...words, "--help"]);
      expect(result.stdout, words.join(" ")).toMatch(/^\s+--no-color\s+\S.*NO_COLOR/m);
    }
  });

  it("takes no value", async () => {
    const result = await runCli(["version", "--no-color=yes"]);

    expect(result.code).toBe(2);
    expect(result.stderr).toContain("--no-color takes no value");
  });
});
