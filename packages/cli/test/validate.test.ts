import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  EXAMPLE_BUNDLE_DIGEST,
  envelopeOf,
  REPORT_SHA256,
  resultOf,
  runCli,
  useTempDir,
  writeConfig,
  writeFiles,
  writeSpecBundle,
} from "./helpers.js";

const TAMPERED = "# Report\nRainy.\n";
// printf '# Report\nRainy.\n' | sha256sum
const TAMPERED_SHA256 = "sha256:857a8139137ed5a9d5b49423c87115ada1e1c890f72ffe00d51076a5fff42333";

describe("validate <path>", () => {
  const dir = useTempDir();

  it("accepts a good bundle", async () => {
    await writeSpecBundle(dir());

    const result = await runCli(["validate", dir()]);

    expect(result.code).toBe(0);
    expect(result.stderr).toBe("");
    expect(result.stdout).toBe(
      `Bundle: path=. id=reports.example.2026-06-04 created=2026-06-04T11:55:00Z digest=${EXAMPLE_BUNDLE_DIGEST} files=1 total_size=16 status=valid\n` +
        `Validate: location=local:${dir()} bundles=1 invalid=0 status=valid\n`,
    );
  });

  it("rejects a tampered file, naming the file and both digests", async () => {
    await writeSpecBundle(dir());
    await writeFile(join(dir(), "report.md"), TAMPERED);

    const result = await runCli(["validate", dir()]);

    expect(result.code).toBe(1);
    expect(result.stdout).toContain("status=invalid");
    expect(result.stderr).toBe(
      `distributor: bundle .: report.md: sha256 mismatch: expected ${REPORT_SHA256}, got ${TAMPERED_SHA256}\n`,
    );
  });

  it("reports a tampered bundle as a failed JSON envelope with the whole result", async () => {
    await writeSpecBundle(dir());
    await writeFile(join(dir(), "report.md"), TAMPERED);

    const result = await runCli(["validate", "--format", "json", dir()]);

    expect(result.code).toBe(1);
    expect(result.stderr).toBe("");
    const envelope = envelopeOf(result);
    expect(envelope.command).toBe("validate");
    expect(envelope.ok).toBe(false);
    expect(envelope.error?.code).toBe("sha256_mismatch");
    expect(envelope.error?.message).toContain("report.md");
    const bundles = envelope.result?.bundles as Array<Record<string, unknown>>;
    expect(bundles).toHaveLength(1);
    expect(bundles[0]).toMatchObject({
      path: ".",
      ok: false,
      id: "reports.example.2026-06-04",
      digest: EXAMPLE_BUNDLE_DIGEST,
      files: 1,
      total_size: 16,
    });
    expect(bundles[0]?.issues).toEqual([
      expect.objectContaining({
        code: "sha256_mismatch",
        path: "report.md",
        expected: REPORT_SHA256,
        actual: TAMPERED_SHA256,
      }),
    ]);
  });

  it("validates every bundle of a tree", async () => {
    await writeSpecBundle(join(dir(), "2026", "06", "a"), "bundle-a");
    await writeSpecBundle(join(dir(), "2026", "06", "b"), "bundle-b");
    await writeFiles(dir(), { "README.txt": "not a bundle file" });

    const result = await runCli(["validate", dir(), "--format", "json"]);

    expect(result.code).toBe(0);
    const envelope = envelopeOf(result);
    expect(envelope.ok).toBe(true);
    const bundles = envelope.result?.bundles as Array<{ path: string; id: string; ok: boolean }>;
    expect(bundles.map((bundle) => [bundle.path, bundle.id, bundle.ok])).toEqual([
      ["2026/06/a", "bundle-a", true],
      ["2026/06/b", "bundle-b", true],
    ]);
  });

  it("fails a tree where one bundle is broken and names that bundle", async () => {
    await writeSpecBundle(join(dir(), "a"), "bundle-a");
    await writeSpecBundle(join(dir(), "b"), "bundle-b");
    await writeFiles(dir(), { "b/extra.txt": "unlisted" });

    const result = await runCli(["validate", dir()]);

    expect(result.code).toBe(1);
    expect(result.stdout).toContain("Bundle: path=a id=bundle-a");
    expect(result.stdout).toContain("bundles=2 invalid=1 status=invalid");
    expect(result.stderr).toBe(
      "distributor: bundle b: extra.txt: present but not listed in manifest.json\n",
    );
  });

  it("fails a directory without bundles", async () => {
    await writeFiles(dir(), { "loose.txt": "x" });

    const result = await runCli(["validate", dir()]);

    expect(result.code).toBe(1);
    expect(result.stderr).toContain("no bundle found");
  });

  it("fails a missing path with exit 1", async () => {
    const result = await runCli(["validate", join(dir(), "missing")]);

    expect(result.code).toBe(1);
    expect(result.stdout).toBe("");
    expect(result.stderr).toBe(`distributor: ${join(dir(), "missing")}: no such directory\n`);
  });

  it("resolves a relative path against the working directory", async () => {
    await writeSpecBundle(join(dir(), "bundle"));

    const result = await runCli(["validate", "bundle"], { cwd: dir() });

    expect(result.code).toBe(0);
    expect(result.stdout).toContain(`location=local:${join(dir(), "bundle")}`);
  });
});

describe("validate --config", () => {
  const dir = useTempDir();

  it("validates the configured source, or one bundle of it", async () => {
    await writeSpecBundle(join(dir(), "spool", "one"), "one");
    await writeSpecBundle(join(dir(), "spool", "two"), "two");
    await writeFiles(dir(), { "spool/two/report.md": TAMPERED });
    const config = await writeConfig(dir(), join(dir(), "spool"), join(dir(), "out"));

    const all = await runCli(["validate", "--config", config, "--pipeline", "reports"]);
    const one = await runCli([
      "validate",
      "--config",
      config,
      "--pipeline",
      "reports",
      "--bundle",
      "one",
      "--format",
      "json",
    ]);

    expect(all.code).toBe(1);
    expect(all.stdout).toContain("pipeline=reports bundles=2 invalid=1");
    expect(all.stderr).toContain("distributor: bundle two: report.md: sha256 mismatch");
    expect(one.code).toBe(0);
    const envelope = envelopeOf(one);
    expect(envelope.result).toMatchObject({ ok: true, pipeline_id: "reports" });
    expect((resultOf(one).bundles as Array<{ id: string }>).map((bundle) => bundle.id)).toEqual([
      "one",
    ]);
  });

  it("names an unknown pipeline", async () => {
    const config = await writeConfig(dir(), join(dir(), "spool"), join(dir(), "out"));

    const text = await runCli(["validate", "--config", config, "--pipeline", "nope"]);
    const json = await runCli([
      "validate",
      "--config",
      config,
      "--pipeline",
      "nope",
      "--format",
      "json",
    ]);

    expect(text.code).toBe(1);
    expect(text.stderr).toBe('distributor: pipeline "nope" not found\n');
    expect(json.code).toBe(1);
    expect(envelopeOf(json)).toEqual({
      command: "validate",
      ok: false,
      result: null,
      error: { code: "pipeline_not_found", message: 'pipeline "nope" not found' },
    });
  });

  it("reports every configuration problem", async () => {
    const config = join(dir(), "broken.yml");
    await writeFile(
      config,
      "pipelines:\n  - id: reports\n    source: {backend: ftp}\n    colour: blue\n",
    );

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
    const envelope = envelopeOf(result);
    expect(envelope.error?.code).toBe("config_invalid");
    expect(envelope.error?.message).toContain("colour");
    expect(envelope.error?.message).toContain("pipelines[0].source.backend");
  });

  it("fails a missing configuration file", async () => {
    const result = await runCli([
      "validate",
      "--config",
      join(dir(), "none.yml"),
      "--pipeline",
      "reports",
    ]);

    expect(result.code).toBe(1);
    expect(result.stderr).toContain("none.yml");
  });
});
