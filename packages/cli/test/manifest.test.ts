import { readFile, symlink } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  EXAMPLE_BUNDLE_DIGEST,
  envelopeOf,
  REPORT,
  runCli,
  useTempDir,
  writeFiles,
} from "./helpers.js";

describe("manifest create", () => {
  const dir = useTempDir();

  it("writes a manifest that validate then accepts", async () => {
    await writeFiles(dir(), { "report.md": REPORT });

    const created = await runCli([
      "manifest",
      "create",
      "--id",
      "reports.example.2026-06-04",
      "--created",
      "2026-06-04T13:55:00+02:00",
      dir(),
    ]);
    const validated = await runCli(["validate", dir()]);

    expect(created.code).toBe(0);
    expect(created.stderr).toBe("");
    expect(created.stdout).toBe(
      `Manifest: path=${join(dir(), "manifest.json")} id=reports.example.2026-06-04 created=2026-06-04T11:55:00Z digest=${EXAMPLE_BUNDLE_DIGEST} files=1 total_size=16\n`,
    );
    const manifest = JSON.parse(await readFile(join(dir(), "manifest.json"), "utf8")) as Record<
      string,
      unknown
    >;
    expect(manifest).toMatchObject({
      schema_version: 1,
      id: "reports.example.2026-06-04",
      created: "2026-06-04T11:55:00Z",
      digest: EXAMPLE_BUNDLE_DIGEST,
    });
    expect(validated.code).toBe(0);
    expect(validated.stdout).toContain("status=valid");
  });

  it("prints the JSON envelope and defaults created to now", async () => {
    await writeFiles(dir(), { "a/one.txt": "1", "b.txt": "2" });
    const before = Math.floor(Date.now() / 1000) * 1000;

    const result = await runCli(["manifest", "create", "--id", "tree", "--format", "json", dir()]);

    expect(result.code).toBe(0);
    const envelope = envelopeOf(result);
    expect(envelope).toMatchObject({
      command: "manifest create",
      ok: true,
      result: { id: "tree", files: 2, total_size: 2, manifest_path: join(dir(), "manifest.json") },
    });
    const created = Date.parse(String(envelope.result?.created));
    expect(created).toBeGreaterThanOrEqual(before);
    expect(String(envelope.result?.created)).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/);
  });

  it("refuses to overwrite a manifest without --force", async () => {
    await writeFiles(dir(), { "report.md": REPORT });
    await runCli(["manifest", "create", "--id", "first", dir()]);
    const original = await readFile(join(dir(), "manifest.json"), "utf8");

    const refused = await runCli(["manifest", "create", "--id", "second", dir()]);
    const refusedJson = await runCli([
      "manifest",
      "create",
      "--id",
      "second",
      "--format",
      "json",
      dir(),
    ]);

    expect(refused.code).toBe(1);
    expect(refused.stdout).toBe("");
    expect(refused.stderr).toBe(
      `distributor: ${dir()}: manifest.json already exists; use --force to overwrite it\n`,
    );
    expect(envelopeOf(refusedJson).error?.code).toBe("bundle_invalid");
    expect(await readFile(join(dir(), "manifest.json"), "utf8")).toBe(original);

    const forced = await runCli(["manifest", "create", "--id", "second", "--force", dir()]);

    expect(forced.code).toBe(0);
    expect(JSON.parse(await readFile(join(dir(), "manifest.json"), "utf8")).id).toBe("second");
  });

  it("refuses symlinks", async () => {
    await writeFiles(dir(), { "report.md": REPORT });
    await symlink(join(dir(), "report.md"), join(dir(), "link.md"));

    const result = await runCli(["manifest", "create", "--id", "links", dir()]);

    expect(result.code).toBe(1);
    expect(result.stderr).toContain("link.md");
  });

  it.each([
    [["--created", "2026-06-04"], "manifest create --created must be an RFC 3339 timestamp"],
    [
      ["--created", "2026-06-04T11:55:00"],
      "manifest create --created must be an RFC 3339 timestamp",
    ],
    [["--id", "bad/id"], "manifest create --id: id must match"],
  ])("treats a malformed %j as a usage error", async (flags, message) => {
    await writeFiles(dir(), { "report.md": REPORT });
    const args = flags[0] === "--id" ? flags : ["--id", "x", ...flags];

    const result = await runCli(["manifest", "create", ...args, dir()]);

    expect(result.code).toBe(2);
    expect(result.stdout).toBe("");
    expect(result.stderr).toContain(message);
  });
});
