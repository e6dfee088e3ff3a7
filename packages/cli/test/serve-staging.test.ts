import { readlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { filesBelow, ownerFlags, same } from "../src/testing/index.js";
import { resultOf, runCli, startServe, useTempDir, writeBundle } from "./helpers.js";

// `distributor serve` publishing uploads to a `releases.promote: manual` destination: each
// upload's run ends `succeeded` with the staged release's id and preview URL, and nothing live
// changes until an operator runs `distributor promote`.

const TOKEN = "staging-upload-token";
const tmp = useTempDir();

const A = { "index.html": "<h1>A</h1>\n", "a.txt": "a\n" };
const B = { "index.html": "<h1>B</h1>\n", "b.txt": "b\n" };

interface UploadedAction {
  status: string;
  release_id: string | null;
  preview_url: string | null;
}

describe("serve with releases.promote: manual", () => {
  it("stages every upload, reports its release and preview, and promotes only on demand", async () => {
    const dir = tmp();
    const root = join(dir, "www");
    const config = join(dir, "distributor.yml");
    await writeFile(
      config,
      `server:\n  http:\n    listen: 127.0.0.1:0\n    staging_directory: ${join(dir, "uploads")}\nupload_tokens:\n  - id: producer\n    token_env: DISTRIBUTOR_UPLOAD_TOKEN\n    allow_pipelines: [site]\npipelines:\n  - id: site\n    source:\n      backend: http_upload\n    destinations:\n      - id: www\n        backend: local\n        path: ${root}\n        path_mapping: {mode: fixed}\n        layout: releases\n        releases: {promote: manual, preview_url: "https://preview.example.org/{release}/"}\n`,
    );
    const serving = await startServe(config, {
      cwd: dir,
      env: { DISTRIBUTOR_UPLOAD_TOKEN: TOKEN },
    });
    try {
      const upload = async (bundle: string, key: string) => {
        const uploaded = await runCli(
          [
            "upload",
            "--server",
            serving.url,
            "--pipeline",
            "site",
            "--idempotency-key",
            key,
            "--wait",
            "--format",
            "json",
            bundle,
          ],
          { env: { DISTRIBUTOR_UPLOAD_TOKEN: TOKEN } },
        );
        expect(uploaded.code, uploaded.stderr).toBe(0);
        const run = resultOf(uploaded).run as {
          status: string;
          result: { actions: UploadedAction[] };
        };
        expect(run.status).toBe("succeeded");
        const [action] = run.result.actions;
        expect(action?.status).toBe("staged");
        const id = action?.release_id as string;
        expect(action?.preview_url).toBe(`https://preview.example.org/${id}/`);
        return id;
      };

      await writeBundle(join(dir, "a"), "site.a", "2026-06-01T00:00:00Z", A);
      const idA = await upload(join(dir, "a"), "a");
      // Staged, not live: there is no `current` yet.
      await expect(readlink(join(root, "current"))).rejects.toThrow();
      expect(same(await filesBelow(join(root, "releases", idA)), A)).toBe(true);
      const first = await runCli(["promote", ...ownerFlags(config), "--to", idA]);
      expect(first.code, first.stderr).toBe(0);
      expect(await readlink(join(root, "current"))).toBe(`releases/${idA}`);

      await writeBundle(join(dir, "b"), "site.b", "2026-06-02T00:00:00Z", B);
      const idB = await upload(join(dir, "b"), "b");
      expect(await readlink(join(root, "current"))).toBe(`releases/${idA}`);
      expect(same(await filesBelow(join(root, "current")), A)).toBe(true);
      const promoted = await runCli(["promote", ...ownerFlags(config), "--latest"]);
      expect(promoted.code, promoted.stderr).toBe(0);
      expect(await readlink(join(root, "current"))).toBe(`releases/${idB}`);
      expect(same(await filesBelow(join(root, "current")), B)).toBe(true);
    } finally {
      serving.child.kill("SIGTERM");
      await serving.exited;
    }
  }, 120_000);
});
