import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import {
  type BackendRegistry,
  createManifestWorkflow,
  parseConfig,
  run,
  runSucceeded,
} from "@distributor/publish";
import { createS3Backend } from "@distributor/storage-s3";
import type { S3Server } from "@distributor/storage-s3/testing";
import {
  backendOn,
  createBucket,
  emptyBucket,
  listKeys,
  s3Server,
  uniqueName,
} from "@distributor/storage-s3/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// S3 keys hold at most 1 024 bytes. A bundle with a longer output path is refused at planning,
// against a real Ceph RGW (which answers such a PUT with a bare 400): nothing is written, no lease
// is left. And a lease an earlier version left behind, journaling such a path, no longer blocks
// the destination: recovery passes over what the store could never hold, and the run finishes.

const found = s3Server();
const LEASE_FORMAT = "distributor-lease/1";

/** Five segments of 240 bytes: every segment is valid, the whole path is 1 204 bytes. */
const LONG = Array.from({ length: 5 }, (_, index) => `${index}`.repeat(240)).join("/");

describe.skipIf(found === undefined)("S3 key length limits, on Ceph RGW", () => {
  const server = found as S3Server;
  let bucket = "";
  let dir = "";

  beforeAll(async () => {
    bucket = await createBucket(server, "name-limits");
    dir = await mkdtemp(join(tmpdir(), "distributor-s3-name-limits-"));
    for (const [name, files] of Object.entries({
      long: { "ok.txt": "fine\n", [LONG]: "too long a key\n" },
      short: { "ok.txt": "fine\n" },
    })) {
      for (const [path, text] of Object.entries(files)) {
        await mkdir(dirname(join(dir, name, path)), { recursive: true });
        await writeFile(join(dir, name, path), text);
      }
      await createManifestWorkflow({
        path: join(dir, name),
        id: "reports.example",
        created: new Date(Date.UTC(2026, 5, 1)),
      });
    }
  });
  afterAll(async () => {
    if (bucket) await emptyBucket(server, bucket, "", true);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const backends: BackendRegistry = {
    s3: async (location) =>
      createS3Backend({
        bucket: location.bucket,
        prefix: location.prefix,
        region: location.region,
        forcePathStyle: location.forcePathStyle,
        ...(location.endpoint === undefined ? {} : { endpoint: location.endpoint }),
        credentials: { accessKeyId: server.accessKeyId, secretAccessKey: server.secretAccessKey },
      }),
  };
  const configFor = (source: string, prefix: string) =>
    parseConfig(`pipelines:
  - id: reports
    source: {backend: local, path: ${join(dir, source)}}
    destinations:
      - id: site
        backend: s3
        bucket: ${bucket}
        prefix: ${prefix}
        endpoint: "${server.endpoint}"
        force_path_style: true
        path_mapping: {mode: fixed}
`);

  it("refuses an output path longer than a key may be, at planning, naming it and the limit", async () => {
    const prefix = uniqueName("long");
    const report = await run({ config: configFor("long", prefix), backends });
    expect(runSucceeded(report)).toBe(false);
    const [action] = report.actions;
    expect(action?.action).toBe("fail_conflict");
    expect(action?.error?.code).toBe("invalid_path");
    expect(action?.reason).toContain(`${LONG.slice(0, 40)}`);
    expect(action?.reason).toContain("(1204 bytes)");
    expect(action?.reason).toContain(`${1024 - prefix.length - 1} bytes`);
    expect(action?.reason.length).toBeLessThan(2_000);
    // Nothing was written: no output, no state, no lease.
    expect(await listKeys(server, bucket, `${prefix}/`)).toEqual([]);
    // --force does not override what the store cannot hold.
    const forced = await run({ config: configFor("long", prefix), backends, force: true });
    expect(forced.actions[0]?.error?.code).toBe("invalid_path");
    expect(await listKeys(server, bucket, `${prefix}/`)).toEqual([]);
  });

  it("recovers past a lease that journals a path the store could never hold", async () => {
    const prefix = uniqueName("stuck");
    // What an earlier version left: its lease, expired, journaling the long path it died on.
    const backend = backendOn(server, bucket, prefix);
    try {
      const lease = {
        format: LEASE_FORMAT,
        owner: { pipeline_id: "reports", destination_id: "site" },
        run_id: "dead-run",
        host: "elsewhere",
        pid: 1,
        acquired_at: "2026-06-01T00:00:00Z",
        expires_at: "2026-06-01T00:01:00Z",
        journal: ["ok.txt", LONG],
        directories: ["", dirname(LONG)],
      };
      await backend.writeFile(".distributor.lease.json", `${JSON.stringify(lease)}\n`);
    } finally {
      await backend.close();
    }
    const report = await run({ config: configFor("short", prefix), backends });
    expect(
      runSucceeded(report),
      report.actions.map((a) => a.error?.message ?? a.reason).join("; "),
    ).toBe(true);
    expect(report.actions[0]?.action).toBe("publish_new");
    expect((await listKeys(server, bucket, `${prefix}/`)).sort()).toEqual([
      `${prefix}/.distributor.json`,
      `${prefix}/ok.txt`,
    ]);
  });
});
