import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { envelopeOf, resultOf, runCli, useTempDir, writeFiles } from "./helpers.js";

// `manifest create` lists whatever a directory holds, but `validate` and `run` apply the
// pipeline's `validation.max_files` (default 10000): the operator learns of the limit, and of the
// setting that raises it, from the first command that meets it.

const tmp = useTempDir();
/** One file more than the default `validation.max_files`. */
const FILES = 10_001;

async function manyFiles(dir: string): Promise<void> {
  for (let d = 0; d < 11; d++) await mkdir(join(dir, `d${d}`), { recursive: true });
  const writes: Promise<void>[] = [];
  for (let i = 0; i < FILES; i++) {
    writes.push(writeFile(join(dir, `d${i % 11}`, `f${i}.txt`), `${i}\n`));
    if (writes.length === 256) await Promise.all(writes.splice(0));
  }
  await Promise.all(writes);
}

describe("manifest create beyond the default validation.max_files", () => {
  it("warns naming the setting; validate names it and its value; a pipeline that raises it accepts the bundle", async () => {
    const bundle = join(tmp(), "bundle");
    await manyFiles(bundle);

    const created = await runCli(["manifest", "create", "--id", "many", bundle]);
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout).toMatch(/^Manifest: .* files=10001 /);
    expect(created.stderr).toBe(
      "distributor: warning: manifest.json lists 10001 files, more than the default validation.max_files 10000: validate and run refuse this bundle unless the pipeline's configuration sets validation.max_files to 10001 or more\n",
    );

    const validated = await runCli(["validate", bundle]);
    expect(validated.code).toBe(1);
    expect(validated.stderr).toBe(
      "distributor: bundle .: manifest.json: lists 10001 files, more than validation.max_files 10000; set validation.max_files in the pipeline's configuration to accept more\n",
    );
    const json = await runCli(["validate", "--format", "json", bundle]);
    expect(envelopeOf(json).error).toMatchObject({ code: "too_many_files" });

    const config = join(tmp(), "distributor.yml");
    await writeFile(
      config,
      `pipelines:
  - id: many
    source: {backend: local, path: ${bundle}}
    validation: {max_files: 20000}
    destinations:
      - {id: archive, backend: local, path: ${join(tmp(), "dest")}}
`,
    );
    const raised = await runCli(["validate", "--config", config, "--pipeline", "many"]);
    expect(raised.code, raised.stderr).toBe(0);
    expect(raised.stdout).toContain("files=10001");
  }, 120_000);

  it("carries the warning in the JSON result", async () => {
    const bundle = join(tmp(), "bundle");
    await manyFiles(bundle);

    const created = await runCli([
      "manifest",
      "create",
      "--id",
      "many",
      "--format",
      "json",
      bundle,
    ]);

    expect(created.code, created.stderr).toBe(0);
    expect(created.stderr).toBe("");
    expect(resultOf(created)).toMatchObject({
      files: FILES,
      warnings: [
        {
          code: "too_many_files",
          path: "manifest.json",
          expected: 10_000,
          actual: FILES,
          message: expect.stringContaining("validation.max_files"),
        },
      ],
    });
  }, 120_000);

  it("has no warnings for a bundle within the default", async () => {
    await writeFiles(tmp(), { "report.md": "# Report\n" });

    const created = await runCli([
      "manifest",
      "create",
      "--id",
      "small",
      "--format",
      "json",
      tmp(),
    ]);

    expect(created.code, created.stderr).toBe(0);
    expect(resultOf(created).warnings).toEqual([]);
  });
});
