import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createManifestWorkflow, parseConfig, run, runSucceeded } from "@distributor/publish";
import { type ProxiedRequest, startTcpProxy, type TcpProxy } from "@distributor/storage/testing";
import type { S3Server } from "@distributor/storage-s3/testing";
import { createBucket, emptyBucket, s3Server, uniqueName } from "@distributor/storage-s3/testing";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { registryOn } from "./registry.js";

// What a run costs in requests, counted by a proxy in front of a real Ceph RGW: a run in which
// everything skips reads one state per destination bundle path and nothing else (docs/design/bundles.md), and
// a first publication makes about one request per output plus a constant per bundle path.

const found = s3Server();

/** Two bundles, one destination bundle path each (`path_mapping: preserve_relative`). */
const BUNDLES = { one: 12, two: 8 } as const;
const FILES = Object.values(BUNDLES).reduce((sum, n) => sum + n, 0);

describe.skipIf(found === undefined)("requests made against Ceph RGW", () => {
  const server = found as S3Server;
  const rgw = new URL(server.endpoint);
  let bucket = "";
  let dir = "";
  let proxy: TcpProxy | undefined;

  beforeAll(async () => {
    bucket = await createBucket(server, "requests");
    dir = await mkdtemp(join(tmpdir(), "distributor-s3-requests-"));
    for (const [bundle, count] of Object.entries(BUNDLES)) {
      for (let i = 0; i < count; i++) {
        const path = join(dir, "source", bundle, `dir${i % 3}`, `file${i}.txt`);
        await mkdir(dirname(path), { recursive: true });
        await writeFile(path, `${bundle} ${i}\n`);
      }
      await createManifestWorkflow({
        path: join(dir, "source", bundle),
        id: `${bundle}.example`,
        created: new Date(Date.UTC(2026, 5, 1)),
      });
    }
  });
  afterAll(async () => {
    if (bucket) await emptyBucket(server, bucket, "", true);
    if (dir) await rm(dir, { recursive: true, force: true });
  });
  afterEach(async () => {
    await proxy?.close();
    proxy = undefined;
  });

  const backends = registryOn(server);
  const configFor = (prefix: string, endpoint: string) =>
    parseConfig(`pipelines:
  - id: reports
    source: {backend: local, path: ${join(dir, "source")}}
    destinations:
      - {id: archive, backend: s3, bucket: ${bucket}, prefix: ${prefix}, endpoint: "${endpoint}", force_path_style: true}
`);
  const describeRequests = (requests: ProxiedRequest[]) =>
    requests.map((request) => `${request.method} ${request.path}`).join("\n");

  it("a skip-only run reads one state per destination bundle path and nothing else", async () => {
    proxy = await startTcpProxy({
      target: { host: rgw.hostname, port: Number(rgw.port) },
      http: true,
    });
    const prefix = uniqueName("skip");
    const config = configFor(prefix, `http://127.0.0.1:${proxy.port}`);
    const first = await run({ config, backends });
    expect(runSucceeded(first)).toBe(true);
    expect(first.actions.map((a) => a.action)).toEqual(["publish_new", "publish_new"]);
    // About one request per published output, plus a constant per bundle path.
    const published = proxy.requests();
    const perPath = (published.length - FILES) / Object.keys(BUNDLES).length;
    expect(perPath, describeRequests(published)).toBeLessThanOrEqual(16);
    expect(published.filter((r) => r.method === "PUT" && /file\d+\.txt/.test(r.path))).toHaveLength(
      FILES,
    );

    proxy.resetCounts();
    const again = await run({ config, backends });
    expect(runSucceeded(again)).toBe(true);
    expect(again.actions.map((a) => a.action)).toEqual(["skip_same", "skip_same"]);
    const requests = proxy.requests();
    expect(requests.map((r) => `${r.method} ${r.path}`).sort()).toEqual([
      `GET /${bucket}/${prefix}/one/.distributor.json?x-id=GetObject`,
      `GET /${bucket}/${prefix}/two/.distributor.json?x-id=GetObject`,
    ]);
  });
});
