import { cp, readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createUploadClient } from "@distributor/upload-client";
import { describe, expect, it } from "vitest";
import {
  envelopeOf,
  runCli,
  type Serving,
  sha256Of,
  startServe,
  useTempDir,
  writeBundle,
} from "./helpers.js";

// End to end: the real `distributor serve` process, fed by `distributor upload` and by the
// upload client library, publishing with the repository's own example configuration.

const EXAMPLES = fileURLToPath(new URL("../../../examples/", import.meta.url));
const EXAMPLE_CONFIG = join(EXAMPLES, "http-upload-local.yml");
const EXAMPLE_BUNDLE = join(EXAMPLES, "source-bundle");
const TOKEN = "end-to-end-upload-token";
const tempDir = useTempDir();

interface ManifestFile {
  path: string;
  sha256: string;
  size: number;
}

async function manifestFiles(bundle: string): Promise<ManifestFile[]> {
  return JSON.parse(await readFile(join(bundle, "manifest.json"), "utf8")).files;
}

/** Every file of the bundle's manifest exists under `published` with the listed bytes. */
async function expectPublished(bundle: string, published: string): Promise<void> {
  for (const file of await manifestFiles(bundle)) {
    const bytes = await readFile(join(published, file.path));
    expect({ path: file.path, sha256: sha256Of(bytes), size: bytes.length }).toEqual(file);
  }
}

async function withServer(body: (serving: Serving, dir: string) => Promise<void>) {
  // The example resolves its relative paths (secrets, published output) against the cwd.
  const dir = tempDir();
  const serving = await startServe(EXAMPLE_CONFIG, {
    cwd: dir,
    env: { DISTRIBUTOR_UPLOAD_TOKEN: TOKEN },
  });
  try {
    await body(serving, dir);
  } finally {
    if (serving.child.exitCode === null) {
      serving.child.kill("SIGTERM");
      await serving.exited;
    }
  }
  expect(serving.stderr()).not.toContain(TOKEN);
}

const published = (dir: string) => join(dir, "workspace", "published", "uploads");

describe("distributor upload against distributor serve", () => {
  it("publishes examples/source-bundle with upload --wait, and a repeated upload is a replay", async () => {
    await withServer(async (serving, dir) => {
      const upload = (key: string) =>
        runCli(
          [
            "upload",
            "--server",
            serving.url,
            "--pipeline",
            "example-upload",
            "--idempotency-key",
            key,
            "--wait",
            "--format",
            "json",
            EXAMPLE_BUNDLE,
          ],
          { env: { DISTRIBUTOR_UPLOAD_TOKEN: TOKEN } },
        );
      const first = await upload("weekly-2026-11-27");
      expect(first.code, first.stderr).toBe(0);
      const envelope = envelopeOf(first);
      expect(envelope.ok).toBe(true);
      const result = envelope.result as Record<string, unknown>;
      expect(result).toMatchObject({
        pipeline_id: "example-upload",
        replayed: false,
        manifest: { id: "reports.weekly.2026-11-27" },
        run: { status: "succeeded" },
      });
      await expectPublished(EXAMPLE_BUNDLE, published(dir));
      const state = JSON.parse(await readFile(join(published(dir), ".distributor.json"), "utf8"));
      expect(JSON.stringify(state)).toContain("reports.weekly.2026-11-27");

      const again = await upload("weekly-2026-11-27");
      expect(again.code, again.stderr).toBe(0);
      expect(envelopeOf(again).result).toMatchObject({
        run_id: result.run_id,
        replayed: true,
        run: { status: "succeeded" },
      });

      // Without --wait a replay shows the run as it is now, not as it was first accepted.
      const replay = (format: string) =>
        runCli(
          [
            "upload",
            "--server",
            serving.url,
            "--pipeline",
            "example-upload",
            "--idempotency-key",
            "weekly-2026-11-27",
            "--format",
            format,
            EXAMPLE_BUNDLE,
          ],
          { env: { DISTRIBUTOR_UPLOAD_TOKEN: TOKEN } },
        );
      const text = await replay("text");
      expect(text.code, text.stderr).toBe(0);
      expect(text.stdout).toMatch(
        new RegExp(
          `^Upload: run_id=${result.run_id} pipeline=example-upload status=succeeded .* replayed=true `,
        ),
      );
      const json = await replay("json");
      expect(json.code, json.stderr).toBe(0);
      expect(envelopeOf(json).result).toMatchObject({
        run_id: result.run_id,
        status: "succeeded",
        replayed: true,
        run: { run_id: result.run_id, status: "succeeded" },
      });
    });
  }, 60_000);

  it("with --wait exits 1 when the run fails, carrying the run's error", async () => {
    await withServer(async (serving, dir) => {
      const upload = (bundle: string) =>
        runCli(
          ["upload", "--server", serving.url, "--pipeline", "example-upload", "--wait", bundle],
          {
            env: { DISTRIBUTOR_UPLOAD_TOKEN: TOKEN },
          },
        );
      expect((await upload(EXAMPLE_BUNDLE)).code).toBe(0);
      // Another bundle id at the same destination bundle path is a conflict the run refuses.
      const other = join(dir, "other");
      await writeBundle(other, "reports.other", "2026-11-28T09:00:00Z", { "other.txt": "other\n" });
      const refused = await upload(other);
      expect(refused.code).toBe(1);
      expect(refused.stdout).toContain("status=failed");
      expect(refused.stderr).toContain("fail_conflict");
      // The first publication is untouched.
      await expectPublished(EXAMPLE_BUNDLE, published(dir));
    });
  }, 60_000);

  it("publishes through the client library: upload, then waitForRun", async () => {
    await withServer(async (serving, dir) => {
      const bundle = join(dir, "bundle");
      await cp(EXAMPLE_BUNDLE, bundle, { recursive: true });
      const client = createUploadClient({ server: serving.url, token: TOKEN });
      const accepted = await client.upload(bundle, { pipeline: "example-upload" });
      expect(accepted).toMatchObject({
        pipeline_id: "example-upload",
        replayed: false,
        manifest: { id: "reports.weekly.2026-11-27" },
      });
      const finished = await client.waitForRun(accepted.run_id, { timeoutMs: 30_000 });
      expect(finished.status).toBe("succeeded");
      expect(finished.error).toBeNull();
      await expectPublished(bundle, published(dir));
      expect((await client.getRun(accepted.run_id)).status).toBe("succeeded");
    });
  }, 60_000);
});
