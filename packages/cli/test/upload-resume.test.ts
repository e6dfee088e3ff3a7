import { createHash, randomBytes } from "node:crypto";
import { mkdir, readdir, readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { startTcpProxy, type TcpProxy } from "@distributor/storage/testing";
import { startPostgres, type TestPostgres } from "@distributor/store-postgres/testing";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { type Serving, spawnUpload, startServe, useTempDir } from "./helpers.js";

// Resumable uploads end to end (docs/integrations/http-upload.md, "Resumable uploads"): real
// `distributor serve` and `distributor upload --wait` processes, a cutting TCP proxy between them.

const TOKEN = "resume-test-token-value";
const MIB = 1024 * 1024;
const SIZE = 48 * MIB;
/** What one resume may add: the creation/HEAD/PATCH heads, and what a cut loses in flight. */
const PER_RESUME_OVERHEAD = 1 * MIB;
const tempDir = useTempDir();
let cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
  cleanups = [];
});

function configText(dir: string, store = "", staging = ""): string {
  return `server:
  http:
    listen: 127.0.0.1:0
    staging_directory: ${join(dir, "staging")}
${store}${staging}upload_tokens:
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
  const files = [{ path: "data.bin", sha256, size: SIZE }];
  const digest = `sha256:${createHash("sha256").update(`${sha256} ${SIZE} data.bin\n`).digest("hex")}`;
  const manifest = {
    schema_version: 1,
    id: "reports.resume",
    created: "2026-06-04T12:00:00Z",
    digest,
    files,
  };
  await writeFile(join(path, "manifest.json"), `${JSON.stringify(manifest, null, 2)}\n`);
  return { path, data };
}

async function serve(dir: string, config: string, options: { listen?: string; env?: object } = {}) {
  const serving = await startServe(config, {
    cwd: dir,
    env: { REPORTER_TOKEN: TOKEN, ...options.env },
    ...(options.listen === undefined ? {} : { listen: options.listen }),
  });
  cleanups.push(async () => {
    serving.child.kill("SIGKILL");
    await serving.exited;
  });
  return serving;
}

async function proxyTo(serving: Serving | { url: string }): Promise<TcpProxy> {
  const target = new URL(serving.url);
  // A bandwidth cap makes "cut at n %" land near n %: bytes arrive about 1 MiB per 25 ms.
  const proxy = await startTcpProxy({
    target: { host: target.hostname, port: Number(target.port) },
    bytesPerSecond: 40 * MIB,
  });
  cleanups.push(() => proxy.close());
  return proxy;
}

function upload(proxy: TcpProxy, bundle: string, key: string) {
  const cli = spawnUpload(`http://127.0.0.1:${proxy.port}`, bundle, key, TOKEN);
  cleanups.push(async () => cli.kill("SIGKILL"));
  return cli;
}

async function partialData(staging: string): Promise<string[]> {
  const found: string[] = [];
  for (const name of await readdir(staging).catch(() => [] as string[])) {
    if (!name.startsWith("partial-")) continue;
    if ((await readdir(join(staging, name))).includes("data"))
      found.push(join(staging, name, "data"));
  }
  return found;
}

describe("distributor upload --wait, resumable", () => {
  it("survives cuts at 10 %, 60 % and 99 %, sending little more than the bundle once", async () => {
    const dir = tempDir();
    const { path, data } = await bigBundle(dir);
    const config = join(dir, "serve.yml");
    await writeFile(config, configText(dir));
    const proxy = await proxyTo(await serve(dir, config));
    const cli = upload(proxy, path, "cut-three-times");
    for (const fraction of [0.1, 0.6, 0.99]) {
      await proxy.untilClientBytes(fraction * SIZE);
      await proxy.cutAll();
    }
    const result = await cli.done;
    expect(result.stderr).toMatch(/resuming the upload at \d+\.\d MiB of 48\.\d MiB/);
    expect(result.code, result.stderr).toBe(0);
    const ratio = proxy.clientBytes() / SIZE;
    console.log(`cut at 10/60/99 %: ${proxy.clientBytes()} bytes sent, ${ratio.toFixed(3)}×`);
    expect(proxy.clientBytes()).toBeLessThanOrEqual(1.1 * SIZE + 3 * PER_RESUME_OVERHEAD);
    expect((await readFile(join(dir, "site", "data.bin"))).equals(data)).toBe(true);
  }, 120_000);

  it("resumes after kill -9 of serve and a restart of the producer, sending only the rest", async () => {
    const dir = tempDir();
    const { path, data } = await bigBundle(dir);
    const config = join(dir, "serve.yml");
    await writeFile(config, configText(dir));
    const first = await serve(dir, config);
    const port = new URL(first.url).port;
    const proxy = await proxyTo(first);
    const cli = upload(proxy, path, "killed");
    await proxy.untilClientBytes(0.5 * SIZE);
    first.child.kill("SIGKILL");
    cli.kill("SIGKILL");
    await first.exited;
    await cli.done;
    const staging = join(dir, "staging");
    const [held] = await partialData(staging);
    expect(held).toBeDefined();
    const sizeBefore = (await stat(held as string)).size;

    await serve(dir, config, { listen: `127.0.0.1:${port}` });
    // What the restarted server reports is never more than its staging file holds.
    const created = await fetch(`http://127.0.0.1:${port}/pipelines/reports/uploads`, {
      method: "POST",
      headers: {
        Authorization: `Bearer ${TOKEN}`,
        "Tus-Resumable": "1.0.0",
        "Idempotency-Key": "killed",
        "Upload-Length": "1",
      },
    });
    // Another length under the key is a conflict, and names no offset: the partial is untouched.
    expect(created.status).toBe(409);
    const id = (held as string).split("/").at(-2)?.slice("partial-".length);
    const probe = await fetch(`http://127.0.0.1:${port}/pipelines/reports/uploads/${id}`, {
      method: "HEAD",
      headers: { Authorization: `Bearer ${TOKEN}`, "Tus-Resumable": "1.0.0" },
    });
    const reported = Number(probe.headers.get("upload-offset"));
    expect(reported).toBeGreaterThan(0);
    expect(reported).toBeLessThanOrEqual((await stat(held as string)).size);
    expect(reported).toBeLessThanOrEqual(sizeBefore);

    const before = proxy.clientBytes();
    const again = upload(proxy, path, "killed");
    const result = await again.done;
    expect(result.code, result.stderr).toBe(0);
    const resumedAt = /resuming the upload at (\d+\.\d) MiB/.exec(result.stderr)?.[1];
    expect(Number(resumedAt) * MIB).toBeLessThanOrEqual(sizeBefore + 0.05 * MIB);
    const sentAfter = proxy.clientBytes() - before;
    console.log(
      `kill -9 at 50 %: held ${sizeBefore} bytes, sent ${sentAfter} more (${(sentAfter / SIZE).toFixed(3)}× of the bundle)`,
    );
    expect(sentAfter).toBeLessThanOrEqual(SIZE - reported + PER_RESUME_OVERHEAD);
    expect((await readFile(join(dir, "site", "data.bin"))).equals(data)).toBe(true);
    // Accepted: recorded beside the partial; its bytes go a grace later, with the sweeper.
    const partials = (await readdir(staging)).filter((name) => name.startsWith("partial-"));
    expect(partials).toHaveLength(1);
    expect(await readdir(join(staging, partials[0] as string))).toContain("accepted.json");
  }, 120_000);
});

let postgres: TestPostgres | null = null;
try {
  postgres = await startPostgres();
} catch (error) {
  if (process.env.CI) throw error;
  console.warn(`resumable uploads across instances skipped: ${(error as Error).message}`);
}
afterAll(async () => {
  await postgres?.stop();
});

describe.runIf(postgres !== null)("resumable uploads across instances (PostgreSQL)", () => {
  it("a cut upload resumes through the other instance", async () => {
    const dir = tempDir();
    const { path, data } = await bigBundle(dir);
    const config = join(dir, "serve.yml");
    await writeFile(
      config,
      configText(
        dir,
        "  store:\n    backend: postgres\n    url_env: DISTRIBUTOR_DATABASE_URL\n",
        `  staging:\n    backend: local\n    path: ${join(dir, "shared-staging")}\n`,
      ),
    );
    await mkdir(join(dir, "shared-staging"), { recursive: true, mode: 0o700 });
    const env = { DISTRIBUTOR_DATABASE_URL: postgres?.url };
    const a = await serve(dir, config, { env });
    const b = await serve(dir, config, { env });
    const toA = await proxyTo(a);
    const toB = await proxyTo(b);
    const cli = upload(toA, path, "across");
    await toA.untilClientBytes(0.6 * SIZE);
    cli.kill("SIGKILL");
    await toA.cutAll();
    await cli.done;
    const [held] = await partialData(join(dir, "shared-staging"));
    const heldBytes = (await stat(held as string)).size;
    expect(heldBytes).toBeGreaterThan(0.4 * SIZE);

    const result = await upload(toB, path, "across").done;
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toMatch(/resuming the upload at/);
    const total = toA.clientBytes() + toB.clientBytes();
    console.log(`across instances: ${total} bytes sent in all, ${(total / SIZE).toFixed(3)}×`);
    expect(toB.clientBytes()).toBeLessThanOrEqual(SIZE - heldBytes + PER_RESUME_OVERHEAD);
    expect((await readFile(join(dir, "site", "data.bin"))).equals(data)).toBe(true);
  }, 120_000);
});
