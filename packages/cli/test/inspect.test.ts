import { rm, writeFile } from "node:fs/promises";
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
  writeSpecBundle,
  writeStateFixture,
} from "./helpers.js";

const FIXTURE_SOURCE_DIGEST =
  "sha256:b84640b7c8a98f1d0cea9f07736e151daf6833cc229b46c0bf3610d16d041bb7";

describe("inspect <bundle>", () => {
  const dir = useTempDir();

  it("prints the manifest and each file as JSON", async () => {
    await writeSpecBundle(dir());

    const result = await runCli(["inspect", "--format", "json", dir()]);

    expect(result.code).toBe(0);
    expect(result.stderr).toBe("");
    expect(envelopeOf(result)).toEqual({
      command: "inspect",
      ok: true,
      result: {
        kind: "bundles",
        ok: true,
        location: `local:${dir()}`,
        issues: [],
        bundles: [
          {
            path: ".",
            ok: true,
            manifest: {
              schema_version: 1,
              id: "reports.example.2026-06-04",
              created: "2026-06-04T11:55:00Z",
              digest: EXAMPLE_BUNDLE_DIGEST,
            },
            files: [{ path: "report.md", sha256: REPORT_SHA256, size: 16, status: "ok" }],
            total_size: 16,
            unlisted_files: [],
            issues: [],
          },
        ],
      },
    });
  });

  it("prints one line per bundle and file as text", async () => {
    await writeSpecBundle(dir());

    const result = await runCli(["inspect", dir()]);

    expect(result.code).toBe(0);
    expect(result.stdout).toBe(
      `Bundle: path=. id=reports.example.2026-06-04 created=2026-06-04T11:55:00Z digest=${EXAMPLE_BUNDLE_DIGEST} files=1 total_size=16 status=valid\n` +
        `File: path=report.md size=16 sha256=${REPORT_SHA256} status=ok\n`,
    );
  });

  it("shows a missing file and fails", async () => {
    await writeSpecBundle(dir());
    await rm(join(dir(), "report.md"));

    const result = await runCli(["inspect", "--format", "json", dir()]);

    expect(result.code).toBe(1);
    const envelope = envelopeOf(result);
    expect(envelope.ok).toBe(false);
    expect(envelope.error?.code).toBe("missing_file");
    const bundles = envelope.result?.bundles as Array<{ files: Array<{ status: string }> }>;
    expect(bundles[0]?.files.map((file) => file.status)).toEqual(["missing_file"]);
  });

  it("fails for a directory holding neither bundles nor state", async () => {
    await writeFile(join(dir(), "loose.txt"), "x");

    const result = await runCli(["inspect", dir()]);

    expect(result.code).toBe(1);
    expect(result.stdout).toBe("");
    expect(result.stderr).toBe(
      `distributor: ${dir()} holds no bundle (manifest.json) and no destination state (.distributor.json)\n`,
    );
  });
});

describe("inspect <destination>", () => {
  const dir = useTempDir();

  it("reads a schema 1 state as single-owner state and reports version 1", async () => {
    await writeStateFixture(dir(), "v1.json");

    const result = await runCli(["inspect", "--format", "json", dir()]);

    expect(result.code).toBe(0);
    const envelope = envelopeOf(result);
    expect(envelope.result).toMatchObject({ kind: "state", ok: true, location: `local:${dir()}` });
    const [state] = resultOf(result).states as Array<Record<string, unknown>>;
    expect(state).toMatchObject({
      path: ".",
      state_file: ".distributor.json",
      schema_version: 1,
      mode: "single_owner",
      distributor_version: "0.9.0",
      published_at: "2026-05-30T11:12:00Z",
      created_at: "2026-05-30T11:12:00Z",
      updated_at: "2026-05-30T11:12:00Z",
    });
    expect(state?.owners).toEqual([
      {
        pipeline_id: "reports",
        destination_id: "archive",
        reconciliation: "replace",
        source: {
          id: "reports.example.2026-05-30",
          created: "2026-05-30T11:00:00Z",
          digest: FIXTURE_SOURCE_DIGEST,
          files: 2,
        },
        outputs: 2,
      },
    ]);
    expect(
      (state?.outputs as Array<{ path: string }> | undefined)?.map((output) => output.path),
    ).toEqual(["report.md", "summary.txt"]);
  });

  it("reports schema 2 state with its outputs and primary URL", async () => {
    await writeStateFixture(dir(), "v2.json");

    const result = await runCli(["inspect", "--format", "json", dir()]);

    expect(result.code).toBe(0);
    const [state] = resultOf(result).states as Array<Record<string, unknown>>;
    expect(state).toMatchObject({
      schema_version: 2,
      mode: "single_owner",
      created_at: "2026-05-29T09:30:00Z",
      updated_at: "2026-05-30T11:12:05Z",
    });
    expect(state?.owners).toEqual([
      expect.objectContaining({
        reconciliation: "replace",
        primary_url: "https://reports.example.com/archive/report.html",
        outputs: 2,
      }),
    ]);
    expect(state?.outputs).toContainEqual({
      path: "report.html",
      kind: "generated",
      source_path: "report.md",
      transform: "markdown_to_html",
      url: "https://reports.example.com/archive/report.html",
      sha256: "sha256:224f1d44070761b167ab1d338a429921d0c63f4c0bd177c2fed6ff800e29d3b0",
      size: 20,
      created_at: "2026-05-30T11:12:00Z",
      updated_at: "2026-05-30T11:12:00Z",
      pipeline_id: "reports",
      destination_id: "archive",
    });
  });

  it("reports every owner of a schema 3 shared root", async () => {
    await writeStateFixture(dir(), "v3.json");

    const result = await runCli(["inspect", "--format", "json", join(dir(), ".distributor.json")]);

    expect(result.code).toBe(0);
    const [state] = resultOf(result).states as Array<Record<string, unknown>>;
    expect(state).toMatchObject({ schema_version: 3, mode: "shared_root" });
    expect(state?.published_at).toBeUndefined();
    const owners = state?.owners as Array<Record<string, unknown>>;
    expect(
      owners.map((owner) => [owner.destination_id, owner.reconciliation, owner.outputs]),
    ).toEqual([
      ["archive", "replace", 1],
      ["html", "merge", 1],
    ]);
  });

  it("prints state, owners and outputs as text", async () => {
    await writeStateFixture(dir(), "v1.json");

    const result = await runCli(["inspect", dir()]);

    expect(result.code).toBe(0);
    const lines = result.stdout.trimEnd().split("\n");
    expect(lines[0]).toBe(`Destination: location=local:${dir()} states=1`);
    expect(lines[1]).toBe(
      "State: path=. schema_version=1 mode=single_owner created_at=2026-05-30T11:12:00Z updated_at=2026-05-30T11:12:00Z owners=1 outputs=2",
    );
    expect(lines[2]).toMatch(
      /^Owner: pipeline=reports destination=archive reconciliation=replace /,
    );
    expect(lines.slice(3).map((line) => line.split(" ")[1])).toEqual([
      "path=report.md",
      "path=summary.txt",
    ]);
  });

  it("names the file and the problem of an invalid state", async () => {
    await writeStateFixture(dir(), "invalid-created-at.json");

    const result = await runCli(["inspect", dir(), "--format", "json"]);

    expect(result.code).toBe(1);
    const envelope = envelopeOf(result);
    expect(envelope.error?.code).toBe("state_invalid");
    expect(envelope.error?.message).toContain(".distributor.json");
    expect(envelope.error?.message).toContain("created_at must be RFC3339");
  });
});

describe("inspect --config", () => {
  const dir = useTempDir();

  it("inspects a configured destination's state", async () => {
    await writeStateFixture(join(dir(), "archive"), "v3.json");
    const config = await writeConfig(dir(), join(dir(), "spool"), join(dir(), "archive"));

    const result = await runCli([
      "inspect",
      "--config",
      config,
      "--pipeline",
      "reports",
      "--destination",
      "archive",
      "--format",
      "json",
    ]);

    expect(result.code).toBe(0);
    expect(envelopeOf(result).result).toMatchObject({
      kind: "state",
      pipeline_id: "reports",
      destination_id: "archive",
      location: `local:${join(dir(), "archive")}`,
    });
  });

  it("inspects one configured source bundle", async () => {
    await writeSpecBundle(join(dir(), "spool", "a"), "bundle-a");
    await writeSpecBundle(join(dir(), "spool", "b"), "bundle-b");
    const config = await writeConfig(dir(), join(dir(), "spool"), join(dir(), "archive"));

    const result = await runCli([
      "inspect",
      "--config",
      config,
      "--pipeline",
      "reports",
      "--bundle",
      "b",
    ]);

    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^Bundle: path=b id=bundle-b /);
    expect(result.stdout).not.toContain("bundle-a");
  });

  it("names an unknown destination", async () => {
    const config = await writeConfig(dir(), join(dir(), "spool"), join(dir(), "archive"));

    const result = await runCli([
      "inspect",
      "--config",
      config,
      "--pipeline",
      "reports",
      "--destination",
      "site",
    ]);

    expect(result.code).toBe(1);
    expect(result.stderr).toBe("distributor: pipeline reports destination site not found\n");
  });
});
