import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { writeSourceBundle } from "@distributor/engine/testing";
import { createLocalBackend } from "@distributor/storage";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/index.js";
import { run, runSucceeded } from "../../src/run/run.js";
import { validateConfiguredSource } from "../../src/validate/validate.js";

// Names that are one name on case-insensitive or normalising stores: warned about by default,
// refused under validation.portable_names: true, in run and in validate.

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "distributor-portable-"));
  await writeSourceBundle(createLocalBackend({ root: join(dir, "src") }), "", {
    "A.html": "upper\n",
    "a.html": "lower\n",
    "caf\u00e9.txt": "composed\n",
    "cafe\u0301.txt": "decomposed\n",
  });
});
afterEach(() => rm(dir, { recursive: true, force: true }));

const config = (portable: boolean) =>
  parseConfig(
    `pipelines:\n  - id: reports\n    source: {backend: local, path: ${join(dir, "src")}}\n    validation: {portable_names: ${portable}}\n    destinations:\n      - id: archive\n        backend: local\n        path: ${join(dir, "dest")}\n`,
  );

describe("portable names", () => {
  it("run publishes and reports each collision as a warning, also when it only skips", async () => {
    const first = await run({ config: config(false) });
    expect(runSucceeded(first)).toBe(true);
    const expected = [
      {
        pipeline_id: "reports",
        bundle_path: ".",
        code: "name_collision",
        path: "A.html",
        message:
          "A.html, a.html: names differ only by letter case and are one name on case-insensitive stores",
      },
      expect.objectContaining({ code: "name_collision", path: "cafe\u0301.txt" }),
    ];
    expect(first.warnings).toEqual(expected);
    const again = await run({ config: config(false) });
    expect(again.actions[0]?.action).toBe("skip_same");
    expect(again.warnings).toEqual(expected);
  });

  it("run refuses the bundle under portable_names: true and writes nothing", async () => {
    const report = await run({ config: config(true) });
    expect(runSucceeded(report)).toBe(false);
    expect(report.pipeline_errors).toEqual([
      expect.objectContaining({
        code: "bundle_invalid",
        message: expect.stringContaining("names differ only by letter case"),
      }),
    ]);
    expect(report.warnings).toEqual([]);
    await expect(readdir(join(dir, "dest"))).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("validate warns, or fails the bundle under portable_names: true", async () => {
    const warned = await validateConfiguredSource({ config: config(false), pipelineId: "reports" });
    expect(warned.ok).toBe(true);
    expect(warned.bundles[0]?.warnings.map((w) => w.code)).toEqual([
      "name_collision",
      "name_collision",
    ]);
    const refused = await validateConfiguredSource({ config: config(true), pipelineId: "reports" });
    expect(refused.ok).toBe(false);
    expect(refused.bundles[0]?.issues.map((i) => i.code)).toEqual([
      "name_collision",
      "name_collision",
    ]);
    expect(refused.bundles[0]?.warnings).toEqual([]);
  });

  it("run also checks the outputs destinations would write and distributor's own names", async () => {
    const src = join(dir, "rendered");
    await writeSourceBundle(createLocalBackend({ root: src }), "", {
      "Notes.md": "# Notes\n",
      "notes.html": "<p>listed</p>\n",
      ".Distributor.json": "{}\n",
    });
    const rendered = (portable: boolean) =>
      parseConfig(
        `pipelines:\n  - id: reports\n    source: {backend: local, path: ${src}}\n    validation: {portable_names: ${portable}}\n    destinations:\n      - id: site\n        backend: local\n        path: ${join(dir, "site")}\n        publish: {source: true, html: true}\n        transform: {markdown_to_html: {enabled: true, mode: sidecar}}\n`,
      );
    const warned = await run({ config: rendered(false) });
    expect(runSucceeded(warned)).toBe(true);
    expect(warned.warnings.map((w) => [w.path, w.message])).toEqual([
      [
        ".Distributor.json",
        ".Distributor.json: is one name with distributor's own .distributor.json on case-insensitive or normalising stores",
      ],
      [
        "Notes.html",
        "destination site outputs Notes.html, notes.html: names differ only by letter case and are one name on case-insensitive stores",
      ],
    ]);

    await rm(join(dir, "site"), { recursive: true });
    const refused = await run({ config: rendered(true) });
    expect(runSucceeded(refused)).toBe(false);
    expect(refused.pipeline_errors).toEqual([
      expect.objectContaining({
        code: "bundle_invalid",
        message: expect.stringContaining("destination site outputs Notes.html, notes.html"),
      }),
    ]);
    await expect(readdir(join(dir, "site"))).rejects.toMatchObject({ code: "ENOENT" });
  });
});
