import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { envelopeOf, resultOf, runCli, useTempDir, writeConfig } from "./helpers.js";

const tmp = useTempDir();

describe("a pipeline whose local source directory does not exist", () => {
  it("run says the directory does not exist (source_not_found) and writes nothing", async () => {
    const source = join(tmp(), "reports", "outbox");
    const destination = join(tmp(), "site");
    const config = await writeConfig(tmp(), source, destination);

    const text = await runCli(["run", "--config", config]);
    expect(text.code).toBe(1);
    expect(text.stdout).toBe("");
    expect(text.stderr).toBe(
      `distributor: pipeline reports: source directory ${source} does not exist\n`,
    );

    const json = await runCli(["run", "--config", config, "--format", "json"]);
    expect(json.code).toBe(1);
    const envelope = envelopeOf(json);
    expect(envelope.error?.code).toBe("source_not_found");
    expect(resultOf(json).pipeline_errors).toEqual([
      {
        pipeline_id: "reports",
        code: "source_not_found",
        message: `source directory ${source} does not exist`,
      },
    ]);
    // Nothing was created: neither the destination nor the missing source.
    expect(existsSync(destination)).toBe(false);
    expect(existsSync(source)).toBe(false);
  });

  it("validate --pipeline reports the same code as its one tree issue", async () => {
    const source = join(tmp(), "missing");
    const config = await writeConfig(tmp(), source, join(tmp(), "site"));

    const result = await runCli([
      "validate",
      "--config",
      config,
      "--pipeline",
      "reports",
      "--format",
      "json",
    ]);

    expect(result.code).toBe(1);
    expect(envelopeOf(result).error?.code).toBe("source_not_found");
    expect(resultOf(result).issues).toEqual([
      {
        code: "source_not_found",
        path: "",
        message: `source directory ${source} does not exist`,
      },
    ]);
  });

  it("an existing directory without bundles stays no_bundles", async () => {
    const empty = join(tmp(), "empty");
    await mkdir(empty);

    const result = await runCli([
      "run",
      "--config",
      await writeConfig(tmp(), empty, join(tmp(), "site")),
      "--format",
      "json",
    ]);

    expect(result.code).toBe(1);
    expect(envelopeOf(result).error).toEqual({
      code: "no_bundles",
      message: `no bundles found in source local:${empty} (no directory holds a manifest.json)`,
    });
  });
});
