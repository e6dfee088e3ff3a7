import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { envelopeOf, runCli, sha256Of, useTempDir } from "./helpers.js";

// A bundle with no files is the documented `empty_bundle` however it is found: by `manifest
// create` in an empty directory, or by `validate` in a manifest that lists nothing.

const tmp = useTempDir();

describe("an empty bundle", () => {
  it("is empty_bundle, not invalid_manifest, for validate on a manifest listing no files", async () => {
    const manifest = {
      schema_version: 1,
      id: "empty",
      created: "2026-06-04T11:55:00Z",
      digest: sha256Of(""),
      files: [],
    };
    await writeFile(join(tmp(), "manifest.json"), `${JSON.stringify(manifest, null, 2)}\n`);

    const json = await runCli(["validate", "--format", "json", tmp()]);
    const text = await runCli(["validate", tmp()]);
    const recreated = await runCli([
      "manifest",
      "create",
      "--id",
      "empty",
      "--force",
      "--format",
      "json",
      tmp(),
    ]);

    expect(json.code).toBe(1);
    expect(envelopeOf(json).error?.code).toBe("empty_bundle");
    expect(text.code).toBe(1);
    expect(text.stderr).toBe("distributor: bundle .: manifest.json: files must not be empty\n");
    // manifest create refuses to list nothing, as it does for an empty directory (a refusal is
    // `bundle_invalid` there, its issue `empty_bundle`).
    expect(recreated.code).toBe(1);
    expect(envelopeOf(recreated).error).toEqual({
      code: "bundle_invalid",
      message: `${tmp()}: bundle holds no files to list`,
    });
  });
});
