import { mkdir, readdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  envelopeOf,
  runCli,
  sha256Of,
  singlePipelineConfig,
  startServe,
  useTempDir,
} from "./helpers.js";
import { pack } from "./upload-load.js";

// A bundle with no files is `empty_bundle` whichever command meets it and however it was made:
// a directory with nothing to list, or a manifest listing nothing.

const tmp = useTempDir();
const TOKEN = "empty-bundle-test-token";

/** Writes a bundle whose manifest lists no files into `dir` and returns `dir`. */
async function emptyManifestBundle(dir: string): Promise<string> {
  await mkdir(dir, { recursive: true });
  const manifest = {
    schema_version: 1,
    id: "empty",
    created: "2026-06-04T11:55:00Z",
    digest: sha256Of(""),
    files: [],
  };
  await writeFile(join(dir, "manifest.json"), `${JSON.stringify(manifest, null, 2)}\n`);
  return dir;
}

describe("an empty bundle", () => {
  it("is empty_bundle, not invalid_manifest, for validate on a manifest listing no files", async () => {
    await emptyManifestBundle(tmp());

    const json = await runCli(["validate", "--format", "json", tmp()]);
    const text = await runCli(["validate", tmp()]);

    expect(json.code).toBe(1);
    expect(envelopeOf(json).error?.code).toBe("empty_bundle");
    expect(text.code).toBe(1);
    expect(text.stderr).toBe("distributor: bundle .: manifest.json: files must not be empty\n");
  });

  it("is empty_bundle for manifest create on an empty directory and on one with only a manifest", async () => {
    const empty = join(tmp(), "empty");
    await mkdir(empty);
    const listed = await emptyManifestBundle(join(tmp(), "listed"));

    const fromDirectory = await runCli([
      "manifest",
      "create",
      "--id",
      "e",
      "--format",
      "json",
      empty,
    ]);
    const fromManifest = await runCli([
      "manifest",
      "create",
      "--id",
      "empty",
      "--force",
      "--format",
      "json",
      listed,
    ]);

    expect(fromDirectory.code).toBe(1);
    expect(envelopeOf(fromDirectory).error).toEqual({
      code: "empty_bundle",
      message: `${empty}: bundle holds no files to list`,
    });
    expect(await readdir(empty)).toEqual([]);
    expect(fromManifest.code).toBe(1);
    expect(envelopeOf(fromManifest).error).toEqual({
      code: "empty_bundle",
      message: `${listed}: bundle holds no files to list`,
    });
  });

  it("is the pipeline error and the envelope code of run, which writes nothing", async () => {
    const source = await emptyManifestBundle(join(tmp(), "source"));
    const destination = join(tmp(), "dest");
    const config = join(tmp(), "distributor.yml");
    await writeFile(config, singlePipelineConfig(source, destination));

    const result = await runCli(["run", "--config", config, "--format", "json"]);

    expect(result.code).toBe(1);
    const envelope = envelopeOf(result);
    expect(envelope.result?.pipeline_errors).toEqual([
      {
        pipeline_id: "reports",
        code: "empty_bundle",
        message: "bundle .: manifest.json: files must not be empty",
      },
    ]);
    expect(envelope.error?.code).toBe("empty_bundle");
    await expect(readdir(destination)).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("is refused by upload before sending, and by serve with 422 empty_bundle", async () => {
    const bundle = await emptyManifestBundle(join(tmp(), "bundle"));
    const config = join(tmp(), "serve.yml");
    const site = join(tmp(), "site");
    await writeFile(
      config,
      `server:
  http:
    listen: 127.0.0.1:0
upload_tokens:
  - {id: reporter, token_env: REPORTER_TOKEN, allow_pipelines: [reports]}
pipelines:
  - id: reports
    source: {backend: http_upload}
    destinations:
      - {id: site, backend: local, path: ${site}}
`,
    );
    const env = { REPORTER_TOKEN: TOKEN, XDG_STATE_HOME: join(tmp(), "state") };
    const serving = await startServe(config, { cwd: tmp(), env });
    try {
      const uploaded = await runCli(
        ["upload", "--server", serving.url, "--pipeline", "reports", "--format", "json", bundle],
        { env: { DISTRIBUTOR_UPLOAD_TOKEN: TOKEN } },
      );
      // The server's refusal would name the request (`upload of empty to ...: server answered`).
      expect(uploaded.code).toBe(1);
      expect(envelopeOf(uploaded).error).toEqual({
        code: "empty_bundle",
        message: "manifest.json: files must not be empty",
      });

      const response = await fetch(`${serving.url}/pipelines/reports/uploads`, {
        method: "POST",
        headers: {
          Authorization: `Bearer ${TOKEN}`,
          "Content-Type": "application/gzip",
          "Idempotency-Key": "empty-1",
        },
        body: new Uint8Array(await pack(bundle)),
        signal: AbortSignal.timeout(20_000),
      });
      expect(response.status).toBe(422);
      expect(((await response.json()) as { error: unknown }).error).toEqual({
        code: "empty_bundle",
        message: "manifest.json: files must not be empty",
      });
    } finally {
      if (serving.child.exitCode === null) serving.child.kill("SIGTERM");
      await serving.exited;
    }
    await expect(readdir(site)).rejects.toMatchObject({ code: "ENOENT" });
  });
});
