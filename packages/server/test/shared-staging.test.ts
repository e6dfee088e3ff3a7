import { mkdir, utimes, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { parseConfig } from "@distributor/publish";
import { describe, expect, it } from "vitest";
import { createMemoryUploadStore } from "../src/index.js";
import { bundleArchive, startServer, tree, upload, waitForRun, workspace } from "./helpers.js";

// docs/integrations/http-upload.md, durability on shared staging (`server.staging: {backend: local}`): other instances may
// be receiving uploads into the same directory, so a starting server removes only orphans older
// than the grace period, and uploads are received there rather than in staging_directory.

function sharedConfig(root: string) {
  return parseConfig(
    `server:
  http:
    listen: 127.0.0.1:0
    staging_directory: ${join(root, "own")}
  staging: {backend: local, path: ${join(root, "shared")}}
upload_tokens:
  - {id: reporter, token_env: REPORTER_TOKEN, allow_pipelines: [reports]}
pipelines:
  - id: reports
    source: {backend: http_upload}
    destinations:
      - {id: site, backend: local, path: ${join(root, "site")}}
`,
    { sourceName: "shared.yml" },
  );
}

describe("shared local staging", () => {
  it("removes only orphans older than the grace period at start, and stages uploads there", async () => {
    const { root, remove } = await workspace();
    try {
      const shared = join(root, "shared");
      await mkdir(join(shared, "upload-old"), { recursive: true, mode: 0o700 });
      await mkdir(join(shared, "upload-young"), { recursive: true });
      await writeFile(join(shared, "upload-old", "manifest.json"), "{}");
      const twoHoursAgo = new Date(Date.now() - 2 * 60 * 60 * 1000);
      await utimes(join(shared, "upload-old"), twoHoursAgo, twoHoursAgo);

      const store = createMemoryUploadStore({ queueSize: 4, retentionMs: 60_000 });
      const running = await startServer(sharedConfig(root), { store });
      try {
        expect(running.events).toContainEqual({
          type: "recovered",
          resumed: 0,
          removed_staging: 1,
          lost: 0,
        });
        expect(await tree(shared)).toEqual(["upload-young"]);

        const archive = await bundleArchive(root, "reports.shared", { "a.md": "# A\n" });
        const answer = await upload(running.url, archive);
        expect(answer.status).toBe(202);
        expect(await waitForRun(running.url, String(answer.json.run_id))).toMatchObject({
          status: "succeeded",
        });
        expect(await tree(join(root, "site"))).toContain("a.md");
        // Nothing was received in the instance's own staging directory.
        expect(await tree(join(root, "own"))).toEqual([]);
      } finally {
        await running.server.close();
      }
    } finally {
      await remove();
    }
  });
});
