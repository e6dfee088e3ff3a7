import { join } from "node:path";
import { type Config, parseConfig } from "@distributor/publish";
import { createMemoryUploadStore, type UploadStore } from "@distributor/server";
import {
  bundleArchive,
  type Running,
  startServer,
  tree,
  upload,
  waitForRun,
  workspace,
} from "@distributor/server/testing";
import type { S3Server } from "@distributor/storage-s3/testing";
import {
  backendOn,
  listKeys,
  s3Server,
  uniqueName,
  useBucket,
} from "@distributor/storage-s3/testing";
import { describe, expect, it } from "vitest";

// docs/config.md `server.staging` on S3: two upload servers sharing one store stage accepted bundles in
// one bucket/prefix of a real S3 gateway (Ceph RGW); whichever runs a job reads it from there.

const server = s3Server();

const bucket = useBucket(server, "staging");

function stagingConfig(root: string, name: string, s3: S3Server, prefix: string): Config {
  return parseConfig(
    `server:
  http:
    listen: 127.0.0.1:0
    queue_size: 16
    workers: 2
    staging_directory: ${join(root, `receive-${name}`)}
  staging:
    backend: s3
    bucket: ${bucket.name()}
    prefix: ${prefix}
    endpoint: "${s3.endpoint}"
    force_path_style: true
upload_tokens:
  - {id: reporter, token_env: REPORTER_TOKEN, allow_pipelines: [reports, other]}
  - {id: other, token_env: OTHER_TOKEN, allow_pipelines: [other]}
pipelines:
  - id: reports
    source: {backend: http_upload}
    destinations:
      - {id: site, backend: local, path: ${join(root, "site")}}
  - id: other
    source: {backend: http_upload}
    destinations:
      - {id: site, backend: local, path: ${join(root, "other-site")}}
`,
    { sourceName: `${name}.yml` },
  );
}

describe.skipIf(server === undefined)("upload servers staging in S3", () => {
  it("run bundles accepted by either server from the bucket, remove them after, and clean old orphans at start", async () => {
    const s3 = server as S3Server;
    const { root, remove } = await workspace();
    const prefix = uniqueName("staging");
    // What crashed instances left: one upload from long ago, one that may still be arriving.
    const young = `upload-${Date.now()}-young`;
    const seed = backendOn(s3, bucket.name(), prefix);
    await seed.writeFile("upload-1000-old/manifest.json", "{}");
    await seed.writeFile(`${young}/manifest.json`, "{}");
    await seed.close();

    const store: UploadStore = createMemoryUploadStore({ queueSize: 16, retentionMs: 3_600_000 });
    const backends = {
      s3: async (location: { bucket: string; prefix: string }) =>
        backendOn(s3, location.bucket, location.prefix),
    };
    const servers: Running[] = [];
    try {
      for (const name of ["a", "b"]) {
        servers.push(await startServer(stagingConfig(root, name, s3, prefix), { store, backends }));
      }
      const recovered = servers.flatMap((running) =>
        running.events.filter((event) => event.type === "recovered"),
      );
      expect(recovered).toEqual([expect.objectContaining({ removed_staging: 1 })]);

      const runIds: string[] = [];
      for (let i = 0; i < 6; i++) {
        const target = servers[i % 2] as Running;
        const archive = await bundleArchive(
          root,
          "reports.s3-staged",
          { [`day-${i}.md`]: `# Day ${i}\n` },
          new Date(Date.parse("2026-06-04T12:00:00Z") + i * 60_000).toISOString(),
        );
        const answer = await upload(target.url, archive);
        expect(answer.status).toBe(202);
        runIds.push(String(answer.json.run_id));
        // Once accepted, the bundle lives in the bucket only.
        expect(await tree(join(root, `receive-${i % 2 === 0 ? "a" : "b"}`))).toEqual([]);
      }
      for (const [i, runId] of runIds.entries()) {
        // Asked of the other server: the store is shared.
        const record = await waitForRun((servers[(i + 1) % 2] as Running).url, runId);
        expect(record, `run ${i}`).toMatchObject({ status: "succeeded", error: null });
      }
      // The last upload is what the destination holds, read back from the bucket.
      expect(await tree(join(root, "site"))).toContain("day-5.md");
      // Every accepted bundle's staged copy is gone (removed right after its final record); the
      // young orphan stays for its owner.
      let keys = await listKeys(s3, bucket.name(), `${prefix}/`);
      for (let i = 0; i < 100 && keys.length > 1; i++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        keys = await listKeys(s3, bucket.name(), `${prefix}/`);
      }
      expect(keys).toEqual([`${prefix}/${young}/manifest.json`]);
    } finally {
      for (const running of servers) await running.server.close();
      await store.close();
      await remove();
    }
  });
});
