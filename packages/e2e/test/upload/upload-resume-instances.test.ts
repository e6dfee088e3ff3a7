import { createHash, randomBytes } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { type Serving, spawnUpload, startServe, useTempDir } from "@distributor/cli/testing";
import { CHUNK_BYTES, coverage, parseChunk } from "@distributor/server/testing";
import { startTcpProxy, type TcpProxy } from "@distributor/storage/testing";
import {
  listKeys,
  type S3Server,
  s3Server,
  uniqueName,
  useBucket,
} from "@distributor/storage-s3/testing";
import { startPostgres, type TestPostgres } from "@distributor/store-postgres/testing";
import { afterAll, afterEach, describe, expect, it } from "vitest";

// Resumable uploads end to end with S3 staging (docs/integrations/http-upload.md, "Resumable
// uploads"): two real `distributor serve` processes on one PostgreSQL database and one prefix of
// a real gateway (Ceph RGW), a real `distributor upload --wait`, and a cutting TCP proxy that
// sends each resume to the other instance.

const TOKEN = "resume-s3-test-token-value";
const MIB = 1024 * 1024;
const SIZE = 48 * MIB;
/**
 * What one resume may add: the creation/HEAD/PATCH heads and what a cut loses in flight (1 MiB),
 * and the chunk the cut instance may still be flushing to the bucket when the other one answers
 * the producer's HEAD (those bytes are sent again).
 */
const PER_RESUME_OVERHEAD = 1 * MIB + CHUNK_BYTES;

const server = s3Server();
const tempDir = useTempDir();
const bucket = useBucket(server, "resume-instances");
let cleanups: (() => Promise<unknown>)[] = [];

let postgres: TestPostgres | null = null;
if (server !== undefined) {
  try {
    postgres = await startPostgres();
  } catch (error) {
    if (process.env.CI === "true" || process.env.CI === "1") throw error;
    console.warn(`resumable uploads on S3 staging skipped: ${(error as Error).message}`);
  }
}
afterAll(async () => {
  await postgres?.stop();
});
afterEach(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
  cleanups = [];
});

function configText(dir: string, name: string, s3: S3Server, prefix: string): string {
  return `server:
  http:
    listen: 127.0.0.1:0
    staging_directory: ${join(dir, `receive-${name}`)}
  store:
    backend: postgres
    url_env: DISTRIBUTOR_DATABASE_URL
  staging:
    backend: s3
    bucket: ${bucket.name()}
    prefix: ${prefix}
    endpoint: "${s3.endpoint}"
    force_path_style: true
    credentials: {access_key_id_env: TEST_S3_KEY, secret_access_key_env: TEST_S3_SECRET}
upload_tokens:
  - {id: reporter, token_env: REPORTER_TOKEN, allow_pipelines: [reports]}
pipelines:
  - id: reports
    source: {backend: http_upload}
    validation: {max_total_size: 100MiB}
    destinations:
      - {id: site, backend: local, path: ${join(dir, "site")}}
`;
}

/** A bundle of one 48 MiB random (incompressible) file. */
async function bigBundle(dir: string): Promise<{ path: string; data: Buffer }> {
  const path = join(dir, "bundle");
  await mkdir(path, { recursive: true });
  const data = randomBytes(SIZE);
  await writeFile(join(path, "data.bin"), data);
  const sha256 = `sha256:${createHash("sha256").update(data).digest("hex")}`;
  const digest = `sha256:${createHash("sha256").update(`${sha256} ${SIZE} data.bin\n`).digest("hex")}`;
  const manifest = {
    schema_version: 1,
    id: "reports.resume",
    created: "2026-06-04T12:00:00Z",
    digest,
    files: [{ path: "data.bin", sha256, size: SIZE }],
  };
  await writeFile(join(path, "manifest.json"), `${JSON.stringify(manifest, null, 2)}\n`);
  return { path, data };
}

/** Instances `a` and `b` on one database and one staging prefix, each with its own directory. */
async function twoInstances(dir: string) {
  const s3 = server as S3Server;
  const prefix = uniqueName("staging");
  const env = {
    REPORTER_TOKEN: TOKEN,
    DISTRIBUTOR_DATABASE_URL: postgres?.url,
    TEST_S3_KEY: s3.accessKeyId,
    TEST_S3_SECRET: s3.secretAccessKey,
    AWS_REGION: s3.region,
  };
  const instances: Serving[] = [];
  for (const name of ["a", "b"]) {
    const config = join(dir, `${name}.yml`);
    await writeFile(config, configText(dir, name, s3, prefix));
    const serving = await startServe(config, { cwd: dir, env });
    cleanups.push(async () => {
      serving.child.kill("SIGKILL");
      await serving.exited;
    });
    instances.push(serving);
  }
  return { a: instances[0] as Serving, b: instances[1] as Serving, prefix };
}

const addressOf = (serving: Serving) => {
  const url = new URL(serving.url);
  return { host: url.hostname, port: Number(url.port) };
};

async function proxyTo(serving: Serving): Promise<TcpProxy> {
  // A bandwidth cap makes "cut at n %" land near n %: bytes arrive about 1 MiB per 25 ms.
  const proxy = await startTcpProxy({ target: addressOf(serving), bytesPerSecond: 40 * MIB });
  cleanups.push(() => proxy.close());
  return proxy;
}

function upload(proxy: TcpProxy, bundle: string, key: string) {
  const cli = spawnUpload(`http://127.0.0.1:${proxy.port}`, bundle, key, TOKEN);
  cleanups.push(async () => cli.kill("SIGKILL"));
  return cli;
}

/** The partial's keys in the bucket, and what its chunk objects cover from 0. */
async function inBucket(prefix: string) {
  const keys = await listKeys(server as S3Server, bucket.name(), `${prefix}/partial-`);
  const chunks = keys.flatMap((key) => parseChunk(key.slice(key.lastIndexOf("/") + 1)) ?? []);
  const id = /partial-([^/]+)\//.exec(keys[0] ?? "")?.[1];
  return { keys, id, covered: coverage(chunks).covered, chunks: chunks.length };
}

const patchesIn = (serving: Serving) =>
  serving
    .stderr()
    .split("\n")
    .filter((line) => line.includes('"type":"request"') && line.includes('"method":"PATCH"'))
    .length;

describe.runIf(server !== undefined && postgres !== null)(
  "resumable uploads across instances on S3 staging (PostgreSQL)",
  () => {
    it("survive cuts at 10 %, 60 % and 99 %, each resume on the other instance", async () => {
      const dir = tempDir();
      const { path, data } = await bigBundle(dir);
      const { a, b, prefix } = await twoInstances(dir);
      const proxy = await proxyTo(a);
      const cli = upload(proxy, path, "cut-three-times");
      let next = b;
      for (const fraction of [0.1, 0.6, 0.99]) {
        await proxy.untilClientBytes(fraction * SIZE);
        proxy.retarget(addressOf(next));
        next = next === a ? b : a;
        await proxy.cutAll();
      }
      const result = await cli.done;
      expect(result.code, result.stderr).toBe(0);
      expect(result.stderr).toMatch(/resuming the upload at \d+\.\d MiB of 48\.\d MiB/);
      // Both instances wrote the partial: a from 0 and after the second cut, b after the others.
      expect(patchesIn(a)).toBeGreaterThanOrEqual(2);
      expect(patchesIn(b)).toBeGreaterThanOrEqual(2);
      const ratio = proxy.clientBytes() / SIZE;
      console.log(
        `S3 staging, cut at 10/60/99 % across instances: ${proxy.clientBytes()} bytes sent, ${ratio.toFixed(3)}×`,
      );
      expect(proxy.clientBytes()).toBeLessThanOrEqual(1.1 * SIZE + 3 * PER_RESUME_OVERHEAD);
      expect((await readFile(join(dir, "site", "data.bin"))).equals(data)).toBe(true);
      // Accepted: the acceptance is recorded in the bucket (the chunks go a grace later).
      expect((await inBucket(prefix)).keys.some((key) => key.endsWith("/accepted.json"))).toBe(
        true,
      );
    }, 180_000);

    it("resume on the other instance after kill -9, never having reported more than the bucket held", async () => {
      const dir = tempDir();
      const { path, data } = await bigBundle(dir);
      const { a, b, prefix } = await twoInstances(dir);
      const proxy = await proxyTo(a);
      const cli = upload(proxy, path, "killed");
      // While a receives, b is asked what the partial holds; each answer is checked against the
      // chunk objects in the bucket listed right before and right after it (they only grow
      // meanwhile): never more than the bucket held, never less than it held already.
      const checks: { before: number; reported: number; covered: number }[] = [];
      while (proxy.clientBytes() < 0.5 * SIZE) {
        const { id, covered: before } = await inBucket(prefix);
        if (id === undefined) {
          await new Promise((resolve) => setTimeout(resolve, 20));
          continue;
        }
        const probe = await fetch(`${b.url}/pipelines/reports/uploads/${id}`, {
          method: "HEAD",
          headers: { Authorization: `Bearer ${TOKEN}`, "Tus-Resumable": "1.0.0" },
        });
        const reported = Number(probe.headers.get("upload-offset"));
        checks.push({ before, reported, covered: (await inBucket(prefix)).covered });
      }
      a.child.kill("SIGKILL");
      cli.kill("SIGKILL");
      await a.exited;
      await cli.done;
      expect(checks.filter((check) => check.reported > 0).length).toBeGreaterThan(0);
      for (const check of checks) {
        expect(check.reported, JSON.stringify(check)).toBeLessThanOrEqual(check.covered);
        expect(check.reported, JSON.stringify(check)).toBeGreaterThanOrEqual(check.before);
      }

      // A chunk PUT the killed instance had sent whole may still complete at the gateway; once
      // the bucket is still, b reports exactly what the chunk objects cover.
      let held = await inBucket(prefix);
      for (let still = 0; still < 5; ) {
        await new Promise((resolve) => setTimeout(resolve, 200));
        const now = await inBucket(prefix);
        still = now.covered === held.covered ? still + 1 : 0;
        held = now;
      }
      expect(held.covered).toBeGreaterThan(0);
      const probe = await fetch(`${b.url}/pipelines/reports/uploads/${held.id}`, {
        method: "HEAD",
        headers: { Authorization: `Bearer ${TOKEN}`, "Tus-Resumable": "1.0.0" },
      });
      expect(Number(probe.headers.get("upload-offset"))).toBe(held.covered);

      proxy.retarget(addressOf(b));
      const before = proxy.clientBytes();
      const result = await upload(proxy, path, "killed").done;
      expect(result.code, result.stderr).toBe(0);
      const resumedAt = /resuming the upload at (\d+\.\d) MiB/.exec(result.stderr)?.[1];
      expect(Math.abs(Number(resumedAt) * MIB - held.covered)).toBeLessThanOrEqual(0.05 * MIB);
      const sentAfter = proxy.clientBytes() - before;
      console.log(
        `S3 staging, kill -9 at 50 %: ${checks.length} offsets checked, held ${held.covered} bytes, sent ${sentAfter} more (${(sentAfter / SIZE).toFixed(3)}× of the bundle)`,
      );
      expect(sentAfter).toBeLessThanOrEqual(SIZE - held.covered + 1 * MIB);
      expect((await readFile(join(dir, "site", "data.bin"))).equals(data)).toBe(true);
      expect((await inBucket(prefix)).keys.some((key) => key.endsWith("/accepted.json"))).toBe(
        true,
      );
    }, 180_000);
  },
);
