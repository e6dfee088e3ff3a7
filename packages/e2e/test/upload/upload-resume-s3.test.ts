import { createHash, randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { type Config, parseConfig } from "@distributor/publish";
import { createMemoryUploadStore, type UploadStore } from "@distributor/server";
import {
  bundleArchive,
  coverage,
  createTus,
  deleteTus,
  errorCode,
  headTus,
  metricsText,
  OTHER_TOKEN,
  parseChunk,
  patchTus,
  type Running,
  startServer,
  TOKEN_ENV,
  waitForRun,
  workspace,
} from "@distributor/server/testing";
import {
  backendOn,
  listKeys,
  type S3Server,
  s3Server,
  uniqueName,
  useBucket,
} from "@distributor/storage-s3/testing";
import { afterEach, beforeEach, describe, expect, it } from "vitest";

// Resumable uploads with `server.staging.backend: s3` (docs/integrations/http-upload.md,
// "Resumable uploads"): two upload servers sharing one store and one bucket/prefix of a real
// gateway (Ceph RGW); a partial created through one continues through the other, and every
// offset either reports is what the chunk objects in the bucket cover.

const server = s3Server();
let root = "";
let removeWorkspace: () => Promise<void> = async () => undefined;
let prefix = "";
let store: UploadStore;
let servers: Running[] = [];

const bucket = useBucket(server, "resume");
beforeEach(async () => {
  ({ root, remove: removeWorkspace } = await workspace());
  prefix = uniqueName("staging");
  store = createMemoryUploadStore({ queueSize: 16, retentionMs: 3_600_000 });
});
afterEach(async () => {
  for (const running of servers) await running.server.close();
  servers = [];
  await store.close();
  await removeWorkspace();
});

function config(name: string, s3: S3Server, uploads: string): Config {
  return parseConfig(
    `server:
  http:
    listen: 127.0.0.1:0
    staging_directory: ${join(root, `receive-${name}`)}
  staging:
    backend: s3
    bucket: ${bucket.name()}
    prefix: ${prefix}
    endpoint: "${s3.endpoint}"
    force_path_style: true
${uploads}
upload_tokens:
  - {id: reporter, token_env: REPORTER_TOKEN, allow_pipelines: [reports]}
  - {id: other, token_env: OTHER_TOKEN, allow_pipelines: [reports]}
pipelines:
  - id: reports
    source: {backend: http_upload, max_upload_size: 4MiB}
    destinations:
      - {id: site, backend: local, path: ${join(root, "site")}}
`,
    { sourceName: `${name}.yml` },
  );
}

/** Two servers, `a` and `b`, on the same store and the same staging prefix. */
async function twoServers(uploads = ""): Promise<[string, string]> {
  const s3 = server as S3Server;
  const backends = {
    s3: async (location: { bucket: string; prefix: string }) =>
      backendOn(s3, location.bucket, location.prefix),
  };
  for (const name of ["a", "b"]) {
    servers.push(await startServer(config(name, s3, uploads), { store, backends, env: TOKEN_ENV }));
  }
  return [servers[0]?.url as string, servers[1]?.url as string];
}

/** A gzip bundle of about 1.3 MiB that does not compress, and its random file. */
async function archive(id = "reports.resumable") {
  const data = randomBytes(1024 * 1024).toString("base64");
  const body = await bundleArchive(root, id, { "report.md": "# Report\n", "data.txt": data });
  return { body, data };
}

const partialKeys = async (location: string) =>
  listKeys(server as S3Server, bucket.name(), `${prefix}/partial-${location.split("/").pop()}/`);

/** What the chunk objects in the bucket cover now: the most any offset reported may be. */
async function bucketCoverage(location: string): Promise<number> {
  const chunks = (await partialKeys(location)).flatMap(
    (key) => parseChunk(key.slice(key.lastIndexOf("/") + 1)) ?? [],
  );
  return coverage(chunks).covered;
}

async function created(url: string, body: Buffer, key = "resumable-key") {
  const response = await createTus(url, body, { key });
  expect(response.status).toBe(201);
  return response.headers.get("location") as string;
}

describe.skipIf(server === undefined)("resumable uploads on S3 staging", () => {
  it("continue on the other instance, report only what the bucket holds, and record the acceptance", async () => {
    const [a, b] = await twoServers();
    const { body, data } = await archive();
    const location = await created(a, body);
    const third = Math.floor(body.length / 3);
    const first = await patchTus(a, location, 0, body.subarray(0, third));
    expect(first.status).toBe(204);
    expect(first.headers.get("upload-offset")).toBe(String(third));
    expect(await bucketCoverage(location)).toBe(third);
    // Nothing of it is in either instance's own directory.
    const probed = await headTus(b, location);
    expect(probed.status).toBe(200);
    expect(probed.headers.get("upload-offset")).toBe(String(third));
    // The same key finds it again through the other instance.
    const again = await createTus(b, body, { key: "resumable-key" });
    expect([again.status, again.headers.get("location")]).toEqual([201, location]);
    const second = await patchTus(b, location, third, body.subarray(third, 2 * third));
    expect(second.headers.get("upload-offset")).toBe(String(2 * third));
    expect(await bucketCoverage(location)).toBe(2 * third);
    const last = await patchTus(a, location, 2 * third, body.subarray(2 * third));
    expect(last.status).toBe(202);
    const { run_id } = (await last.json()) as { run_id: string };
    expect(await waitForRun(b, run_id)).toMatchObject({ status: "succeeded" });
    expect(await readFile(join(root, "site", "data.txt"), "utf8")).toBe(data);
    // Accepted: the record is in the bucket (the chunks go a grace later, with the sweeper); the
    // last PATCH again replays through b.
    const left = (await partialKeys(location)).map((key) => key.slice(key.lastIndexOf("/") + 1));
    expect(left).toContain("accepted.json");
    const replay = await patchTus(b, location, body.length, Buffer.alloc(0));
    expect(replay.status).toBe(200);
    expect(((await replay.json()) as { run_id: string }).run_id).toBe(run_id);
  });

  it("take two PATCHes of the same bytes at once on both instances without a lock, and accept the archive once", async () => {
    const [a, b] = await twoServers();
    const { body, data } = await archive();
    const location = await created(a, body);
    const half = Math.floor(body.length / 2);
    // A stalled request and its resume on the other instance, both from 0: no 423 on S3.
    const [first, second] = await Promise.all([
      patchTus(a, location, 0, body.subarray(0, half)),
      patchTus(b, location, 0, body.subarray(0, half + 1000)),
    ]);
    expect([first.status, second.status]).toEqual([204, 204]);
    expect(await bucketCoverage(location)).toBe(half + 1000);
    const chunks = (await partialKeys(location)).filter((key) => key.includes("/chunk-"));
    expect(chunks.length).toBeGreaterThanOrEqual(2);
    expect((await headTus(a, location)).headers.get("upload-offset")).toBe(String(half + 1000));
    const last = await patchTus(a, location, half + 1000, body.subarray(half + 1000));
    expect(last.status).toBe(202);
    const { run_id } = (await last.json()) as { run_id: string };
    expect(await waitForRun(b, run_id)).toMatchObject({ status: "succeeded" });
    expect(await readFile(join(root, "site", "data.txt"), "utf8")).toBe(data);
  });

  it("refuse hostile PATCHes with clear codes, keeping exactly what the bucket held", async () => {
    const [a, b] = await twoServers();
    const { body, data } = await archive();
    const location = await created(a, body);
    expect((await patchTus(a, location, 0, body.subarray(0, 4096))).status).toBe(204);
    const refusals: [Response, number, string][] = [
      [await patchTus(b, location, 8192, body.subarray(8192, 9000)), 409, "offset_mismatch"],
      [await patchTus(a, location, 1000, body.subarray(1000, 9000)), 409, "offset_mismatch"],
      [
        await patchTus(b, location, 4096, Buffer.concat([body.subarray(4096), Buffer.alloc(10)])),
        413,
        "upload_past_length",
      ],
      [
        await patchTus(b, location, 4096, body.subarray(4096, 8192), {
          "Upload-Checksum": `sha1 ${createHash("sha1").update("else").digest("base64")}`,
        }),
        460,
        "checksum_mismatch",
      ],
      [
        await patchTus(b, location, 4096, body.subarray(4096, 8192), {}, OTHER_TOKEN),
        403,
        "upload_not_owned",
      ],
    ];
    for (const [response, status, code] of refusals) {
      expect([response.status, await errorCode(response)]).toEqual([status, code]);
    }
    expect((await headTus(a, location, OTHER_TOKEN)).status).toBe(403);
    // One chunk, the first PATCH's: the refused bodies left nothing in the bucket.
    const chunks = (await partialKeys(location)).filter((key) => key.includes("/chunk-"));
    expect(chunks).toHaveLength(1);
    expect(await bucketCoverage(location)).toBe(4096);
    expect((await headTus(b, location)).headers.get("upload-offset")).toBe("4096");
    const last = await patchTus(b, location, 4096, body.subarray(4096));
    expect(last.status).toBe(202);
    const { run_id } = (await last.json()) as { run_id: string };
    expect(await waitForRun(a, run_id)).toMatchObject({ status: "succeeded" });
    expect(await readFile(join(root, "site", "data.txt"), "utf8")).toBe(data);
  });

  it("terminate through either instance: the partial's prefix goes, a body after is refused", async () => {
    const [a, b] = await twoServers();
    const { body } = await archive();
    const location = await created(a, body);
    expect((await patchTus(a, location, 0, body.subarray(0, 2048))).status).toBe(204);
    expect((await deleteTus(b, location, OTHER_TOKEN)).status).toBe(403);
    expect((await deleteTus(b, location)).status).toBe(204);
    expect(await partialKeys(location)).toEqual([]);
    const after = await patchTus(a, location, 2048, body.subarray(2048));
    expect([after.status, await errorCode(after)]).toEqual([404, "upload_not_found"]);
    expect(await partialKeys(location)).toEqual([]);
  });

  it("count S3 partials against a token's limit and in both instances' metrics, and expire them from the bucket", async () => {
    const [a, b] = await twoServers("  uploads: {partial_ttl: 4s, max_partials_per_token: 2}");
    const { body } = await archive();
    const location = await created(a, body, "expiring");
    const firstPatch = await patchTus(a, location, 0, body.subarray(0, 5000));
    expect(firstPatch.status, await firstPatch.clone().text()).toBe(204);
    expect((await createTus(b, body, { key: "second" })).status).toBe(201);
    const third = await createTus(b, body, { key: "third" });
    expect([third.status, await errorCode(third)]).toEqual([429, "too_many_partial_uploads"]);
    const other = await createTus(a, body, { key: "third", token: OTHER_TOKEN });
    expect(other.status).toBe(201);
    // b never received a byte of it, yet holds it in its metrics: they read the bucket.
    const before = await metricsText(b);
    expect(before).toMatch(/^distributor_partial_uploads 3$/m);
    expect(before).toMatch(/^distributor_partial_upload_bytes 5000$/m);

    const deadline = Date.now() + 20_000;
    while ((await bucketCoverage(location)) > 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    const left = (await partialKeys(location)).map((key) => key.slice(key.lastIndexOf("/") + 1));
    expect(left.sort()).toEqual(["expired.json", "info.json"]);
    for (const url of [a, b]) {
      const text = await metricsText(url);
      expect(text).toMatch(/^distributor_partial_uploads 0$/m);
      expect(text).toMatch(/^distributor_partial_upload_bytes 0$/m);
    }
    const expirations = await Promise.all([a, b].map((url) => metricsText(url)));
    const total = expirations
      .map((text) =>
        Number(/^distributor_partial_upload_expirations_total (\d+)$/m.exec(text)?.[1]),
      )
      .reduce((sum, count) => sum + count, 0);
    // Each instance counts the expirations its own sweeps did; both may sweep one partial.
    expect(total, expirations.join("\n")).toBeGreaterThanOrEqual(1);
    const late = await patchTus(b, location, 5000, body.subarray(5000));
    expect([late.status, await errorCode(late)]).toEqual([410, "upload_expired"]);
    const fresh = await createTus(a, body, { key: "expiring" });
    expect(fresh.status).toBe(201);
    expect(fresh.headers.get("upload-offset")).toBe("0");
  });
});
