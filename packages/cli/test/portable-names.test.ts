import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { envelopeOf, resultOf, runCli, useTempDir, writeBundle } from "./helpers.js";

const tmp = useTempDir();

const CASE =
  "A.html, a.html: names differ only by letter case and are one name on case-insensitive stores";

async function collidingSource(portable: boolean) {
  const source = join(tmp(), "src");
  await writeBundle(source, "reports.daily", "2026-06-01T00:00:00Z", {
    "A.html": "upper\n",
    "a.html": "lower\n",
    "docs/caf\u00e9.txt": "composed\n",
    "docs/cafe\u0301.txt": "decomposed\n",
  });
  const config = join(tmp(), "distributor.yml");
  await writeFile(
    config,
    `pipelines:\n  - id: reports\n    source: {backend: local, path: ${source}}\n    validation: {portable_names: ${portable}}\n    destinations:\n      - id: archive\n        backend: local\n        path: ${join(tmp(), "dest")}\n`,
  );
  return { source, config };
}

describe("portable names", () => {
  it("validate and run warn on stderr and in JSON, and still succeed", async () => {
    const { source, config } = await collidingSource(false);
    const validated = await runCli(["validate", source]);
    expect(validated.code, validated.stderr).toBe(0);
    expect(validated.stderr.split("\n")).toEqual([
      `distributor: warning: bundle .: ${CASE}`,
      "distributor: warning: bundle .: docs/cafe\\u{301}.txt, docs/caf\\u{e9}.txt: names differ only by Unicode normalisation (NFC/NFD) and are one name on normalising stores",
      "",
    ]);
    const json = await runCli(["validate", "--format", "json", source]);
    const bundles = resultOf(json).bundles as Array<{ warnings: Array<{ code: string }> }>;
    expect(bundles[0]?.warnings.map((w) => w.code)).toEqual(["name_collision", "name_collision"]);

    const ran = await runCli(["run", "--config", config]);
    expect(ran.code, ran.stderr).toBe(0);
    expect(ran.stdout).toContain("action=publish_new status=published");
    expect(ran.stderr).toContain(`distributor: warning: pipeline reports bundle .: ${CASE}`);
    const again = await runCli(["run", "--config", config, "--format", "json"]);
    expect(envelopeOf(again).ok).toBe(true);
    expect(resultOf(again).warnings).toEqual([
      expect.objectContaining({ pipeline_id: "reports", bundle_path: ".", path: "A.html" }),
      expect.objectContaining({ code: "name_collision", path: "docs/cafe\u0301.txt" }),
    ]);
  });

  it("validation.portable_names: true refuses the bundle in validate and run", async () => {
    const { config } = await collidingSource(true);
    const validated = await runCli(["validate", "--config", config, "--pipeline", "reports"]);
    expect(validated.code).toBe(1);
    expect(validated.stderr).toContain(`distributor: bundle .: ${CASE}`);
    const ran = await runCli(["run", "--config", config]);
    expect(ran.code).toBe(1);
    expect(ran.stderr).toContain(CASE);
    expect(ran.stdout).toBe("");
  });
});
