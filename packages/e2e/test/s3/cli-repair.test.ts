import { createHash } from "node:crypto";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import {
  DeleteObjectCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
} from "@aws-sdk/client-s3";
import type { S3Server } from "@distributor/storage-s3/testing";
import {
  createBucket,
  emptyBucket,
  rawClient,
  s3Server,
  uniqueName,
} from "@distributor/storage-s3/testing";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { runCliIn } from "./cli-process.js";

// Destination repair on S3 (Ceph RGW) through the real CLI process: audit, run --repair,
// adoption of objects another tool uploaded (here: the SDK, as `aws s3 sync` would), rebuilding a
// corrupted state, and pruning an archive of bundle paths.

const found = s3Server();

const FILES = {
  "report.md": "# Report\nSunny.\n",
  "data/summary.txt": "Summary of the day\n",
  "data/table.csv": "a,b\n1,2\n",
};

describe.skipIf(found === undefined)("destination repair on S3 (Ceph RGW)", () => {
  const server = found as S3Server;
  const env: Record<string, string> = {
    TEST_S3_KEY: found?.accessKeyId ?? "",
    TEST_S3_SECRET: found?.secretAccessKey ?? "",
  };
  let bucket = "";
  let dir = "";

  beforeAll(async () => {
    bucket = await createBucket(server, "repair");
  });
  afterAll(async () => {
    if (bucket) await emptyBucket(server, bucket, "", true);
  });
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "distributor-s3-repair-"));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const runCli = (args: readonly string[]) => runCliIn(dir, env, args);

  /** Writes a bundle and its manifest with the CLI's own `manifest create`. */
  const bundle = async (root: string, created: string, files: Record<string, string>) => {
    for (const [path, text] of Object.entries(files)) {
      await mkdir(dirname(join(root, path)), { recursive: true });
      await writeFile(join(root, path), text);
    }
    const made = await runCli([
      ...["manifest", "create", "--id", "reports.daily", "--created", created, "--force"],
      root,
    ]);
    expect(made.code, made.stderr).toBe(0);
  };

  /** One-file bundle with its manifest written directly (docs/design/bundles.md digests): quicker than a process each. */
  const dayBundle = async (root: string, created: string, body: string) => {
    const sha = (t: string) => `sha256:${createHash("sha256").update(t).digest("hex")}`;
    const size = Buffer.byteLength(body);
    await mkdir(root, { recursive: true });
    await writeFile(join(root, "report.md"), body);
    const manifest = {
      schema_version: 1,
      id: "reports.daily",
      created,
      digest: sha(`${sha(body)} ${size} report.md\n`),
      files: [{ path: "report.md", sha256: sha(body), size }],
    };
    await writeFile(join(root, "manifest.json"), `${JSON.stringify(manifest, null, 2)}\n`);
  };

  /** A config publishing `source` below a fresh prefix of the bucket. */
  const setup = async (source: string, extra = "") => {
    const prefix = uniqueName("repair");
    const config = join(dir, "distributor.yml");
    await writeFile(
      config,
      `pipelines:\n  - id: reports\n    source: {backend: local, path: ${source}}\n    destinations:\n      - {id: archive, backend: s3, bucket: ${bucket}, prefix: ${prefix}, endpoint: "${server.endpoint}", force_path_style: true, credentials: {access_key_id_env: TEST_S3_KEY, secret_access_key_env: TEST_S3_SECRET}${extra}}\n`,
    );
    const selector = ["--config", config, "--pipeline", "reports", "--destination", "archive"];
    return { prefix, config, selector };
  };

  const send = async <Output>(command: { input: unknown }): Promise<Output> => {
    const client = rawClient(server);
    try {
      return (await client.send(command as never)) as Output;
    } finally {
      client.destroy();
    }
  };
  const put = (key: string, body: string) =>
    send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body }));
  // The body is read before the client goes: destroying it first aborts the body's stream.
  const text = async (key: string) => {
    const client = rawClient(server);
    try {
      const response = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
      return (await response.Body?.transformToString()) ?? "";
    } finally {
      client.destroy();
    }
  };
  /** Key → ETag and modification time below `prefix/`: what any write would change. */
  const objects = async (prefix: string) => {
    const found: Record<string, string> = {};
    let token: string | undefined;
    do {
      const page = await send<{
        Contents?: { Key?: string; ETag?: string; LastModified?: Date }[];
        NextContinuationToken?: string;
      }>(
        new ListObjectsV2Command({
          Bucket: bucket,
          Prefix: `${prefix}/`,
          ...(token ? { ContinuationToken: token } : {}),
        }),
      );
      for (const object of page.Contents ?? []) {
        found[(object.Key ?? "").slice(prefix.length + 1)] =
          `${object.ETag} ${object.LastModified?.toISOString()}`;
      }
      token = page.NextContinuationToken;
    } while (token !== undefined);
    return found;
  };
  const withoutState = (listing: Record<string, string>) =>
    Object.fromEntries(
      Object.entries(listing).filter(([key]) => !key.endsWith(".distributor.json")),
    );

  it("audit finds a deleted, a truncated and a replaced object; run --repair restores them", async () => {
    const source = join(dir, "src");
    await bundle(source, "2026-06-01T00:00:00Z", FILES);
    const { prefix, config } = await setup(source);
    expect((await runCli(["run", "--config", config])).code).toBe(0);
    const clean = await runCli(["audit", "--config", config]);
    expect(clean.code, clean.stdout + clean.stderr).toBe(0);

    await send(new DeleteObjectCommand({ Bucket: bucket, Key: `${prefix}/report.md` }));
    await put(`${prefix}/data/summary.txt`, "Summ");
    await put(`${prefix}/data/table.csv`, "a,b\n9,9\n");
    const drifted = await runCli(["audit", "--config", config]);
    expect(drifted.code).toBe(1);
    expect(drifted.stdout).toContain(
      "bundle=. status=drift checked=3 ok=0 missing=1 changed=2 unmanaged=0",
    );

    const repaired = await runCli(["run", "--config", config, "--repair"]);
    expect(repaired.code, repaired.stderr).toBe(0);
    expect(repaired.stdout).toContain("action=repair status=published outputs=3");
    for (const [path, body] of Object.entries(FILES)) {
      expect(await text(`${prefix}/${path}`)).toBe(body);
    }
    const audited = await runCli(["audit", "--config", config]);
    expect(audited.code, audited.stdout).toBe(0);
    expect(audited.stdout).toContain("status=ok checked=3 ok=3 missing=0 changed=0");
  }, 60_000);

  it("adopts objects another tool uploaded with exactly the bundle's bytes, writing none", async () => {
    const source = join(dir, "src");
    await bundle(source, "2026-06-01T00:00:00Z", FILES);
    const { prefix, config, selector } = await setup(source);
    for (const [path, body] of Object.entries(FILES)) await put(`${prefix}/${path}`, body);
    const before = await objects(prefix);

    const adopted = await runCli(["reconcile-state", ...selector, "--adopt", "--format", "json"]);
    expect(adopted.code, adopted.stderr).toBe(0);
    const result = JSON.parse(adopted.stdout).result as {
      bundles: { adopted_outputs: unknown[] }[];
    };
    expect(result.bundles[0]?.adopted_outputs).toHaveLength(3);
    const after = await objects(prefix);
    expect(Object.keys(after)).toContain(".distributor.json");
    expect(withoutState(after)).toEqual(before);
    const run = await runCli(["run", "--config", config]);
    expect(run.stdout).toContain("action=skip_same status=skipped");
    expect((await runCli(["audit", "--config", config])).code).toBe(0);
  }, 60_000);

  it("rebuilds a corrupted state from the source and the objects present", async () => {
    const source = join(dir, "src");
    await bundle(source, "2026-06-01T00:00:00Z", FILES);
    const { prefix, config, selector } = await setup(source);
    expect((await runCli(["run", "--config", config])).code).toBe(0);
    await put(`${prefix}/.distributor.json`, '{"schema_version": 2, "trunc');
    expect((await runCli(["audit", "--config", config])).code).toBe(1);

    const before = withoutState(await objects(prefix));
    const rebuilt = await runCli(["reconcile-state", ...selector, "--rebuild"]);
    expect(rebuilt.code, rebuilt.stderr).toBe(0);
    expect(rebuilt.stdout).toContain("mode=rebuild bundle=. status=changed adopted=3");
    expect(withoutState(await objects(prefix))).toEqual(before);
    expect((await runCli(["audit", "--config", config])).code).toBe(0);
  }, 60_000);

  it("prunes an archive of 30 bundle paths to the newest 10", async () => {
    const source = join(dir, "src");
    const day = (n: number) => `2026-06-${String(n).padStart(2, "0")}`;
    for (let n = 1; n <= 30; n++) {
      await dayBundle(join(source, day(n)), `${day(n)}T06:00:00Z`, `# Day ${n}\n`);
    }
    const { prefix, config, selector } = await setup(
      source,
      ", retention: {prune: {enabled: true, keep_latest: 10}}",
    );
    expect((await runCli(["run", "--config", config])).code).toBe(0);
    const dry = await runCli(["prune", ...selector, "--dry-run"]);
    expect(dry.stdout).toContain("unit=bundles checked=30 planned=20 deleted=0 preserved=10");
    expect(Object.keys(await objects(prefix))).toHaveLength(60);

    const applied = await runCli(["prune", ...selector, "--apply"]);
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stdout).toContain(
      "status=changed unit=bundles checked=30 planned=20 deleted=20 preserved=10",
    );
    const kept = Array.from({ length: 10 }, (_, i) => day(21 + i));
    expect(Object.keys(await objects(prefix)).sort()).toEqual(
      kept.flatMap((name) => [`${name}/.distributor.json`, `${name}/report.md`]),
    );
    expect((await runCli(["audit", "--config", config])).code).toBe(0);
  }, 180_000);
});
