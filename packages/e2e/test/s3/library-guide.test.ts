import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { S3Server } from "@distributor/storage-s3/testing";
import { createBucket, emptyBucket, listKeys, s3Server } from "@distributor/storage-s3/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { guideProject, runScript, writeBundle } from "../support/library-guide.js";

const found = s3Server();

// The programs of docs/consumers/library.md, copied verbatim, against Ceph RGW and a local
// directory, with only @distributor/publish and @distributor/storage-s3 installed.
describe.skipIf(found === undefined)("the library guide's programs with S3 (Ceph RGW)", () => {
  const server = found as S3Server;
  let bucket = "";
  let dir = "";
  const env = () => ({
    GUIDE_S3_KEY: server.accessKeyId,
    GUIDE_S3_SECRET: server.secretAccessKey,
  });

  beforeAll(async () => {
    bucket = await createBucket(server, "guide");
    dir = await mkdtemp(join(tmpdir(), "distributor-guide-s3-"));
    await guideProject(dir, ["publish", "storage-s3"], ["publish.mjs", "list.mjs"]);
    await writeBundle(join(dir, "outgoing", "daily"), "reports.daily", "2026-06-04T11:55:00Z", {
      "report.md": "# Report\nSunny.\n",
      "data/table.csv": "a,b\n1,2\n",
    });
    await writeFile(
      join(dir, "distributor.yml"),
      `pipelines:
  - id: reports
    source: {backend: local, path: ./outgoing}
    destinations:
      - id: site
        backend: local
        path: ./site
      - id: bucket
        backend: s3
        bucket: ${bucket}
        region: ${server.region}
        endpoint: ${server.endpoint}
        force_path_style: true
        credentials: {access_key_id_env: GUIDE_S3_KEY, secret_access_key_env: GUIDE_S3_SECRET}
`,
    );
  });
  afterAll(async () => {
    if (bucket) await emptyBucket(server, bucket, "", true);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("publishes to S3 and a local directory with remoteBackends(), then skips the same bundle", async () => {
    const first = await runScript(dir, ["publish.mjs", "distributor.yml"], env());
    expect(first.stderr).toBe("");
    expect(first.code).toBe(0);
    expect(first.stdout.trim().split("\n").sort()).toEqual([
      "reports bucket publish_new published",
      "reports site publish_new published",
    ]);
    expect((await listKeys(server, bucket)).sort()).toEqual([
      "daily/.distributor.json",
      "daily/data/table.csv",
      "daily/report.md",
    ]);
    expect(await readFile(join(dir, "site", "daily", "report.md"), "utf8")).toBe(
      "# Report\nSunny.\n",
    );

    const again = await runScript(dir, ["publish.mjs", "distributor.yml"], env());
    expect(again.code).toBe(0);
    expect(again.stdout.trim().split("\n").sort()).toEqual([
      "reports bucket skip_same skipped",
      "reports site skip_same skipped",
    ]);
  });

  it("lists a configured S3 destination with openS3Location", async () => {
    const listed = await runScript(
      dir,
      ["list.mjs", "distributor.yml", "reports", "bucket"],
      env(),
    );
    expect(listed.stderr).toBe("");
    expect(listed.code).toBe(0);
    expect(listed.stdout.trim().split("\n")).toEqual([
      "daily/.distributor.json",
      "daily/data/table.csv",
      "daily/report.md",
    ]);
  });

  it("reports the S3 destination failed, naming the secret, when its credentials are empty", async () => {
    const failed = await runScript(dir, ["publish.mjs", "distributor.yml"], {
      GUIDE_S3_KEY: "",
      GUIDE_S3_SECRET: "",
    });
    expect(failed.code).toBe(1);
    expect(failed.stdout.trim().split("\n").sort()).toEqual([
      "reports bucket null failed",
      "reports site skip_same skipped",
    ]);
    expect(failed.stderr).toBe(
      "bucket: secret_unavailable: secret GUIDE_S3_KEY is not available: environment variable GUIDE_S3_KEY is empty and no secrets.directory is configured\n",
    );
  });
});
