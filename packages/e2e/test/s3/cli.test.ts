import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { DeleteObjectCommand, GetObjectCommand, PutObjectCommand } from "@aws-sdk/client-s3";
import type { S3Server } from "@distributor/storage-s3/testing";
import {
  createBucket,
  emptyBucket,
  listKeys,
  rawClient,
  s3Server,
  uniqueName,
} from "@distributor/storage-s3/testing";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { runCliIn } from "./cli-process.js";

const exec = promisify(execFile);
const found = s3Server();

describe.skipIf(found === undefined)("distributor CLI with S3 (Ceph RGW)", () => {
  const server = found as S3Server;
  // Credentials reach the CLI only through the environment variables the config names.
  const env: Record<string, string> = {
    // Collected even when the suite is skipped, so the server may be missing here.
    TEST_S3_KEY: found?.accessKeyId ?? "",
    TEST_S3_SECRET: found?.secretAccessKey ?? "",
  };
  let bucket = "";
  let dir = "";

  beforeAll(async () => {
    bucket = await createBucket(server, "cli");
  });
  afterAll(async () => {
    if (bucket) await emptyBucket(server, bucket, "", true);
  });
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "distributor-s3-cli-"));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const runCli = (args: readonly string[]) => runCliIn(dir, env, args);

  const writeFiles = async (root: string, files: Record<string, string>) => {
    for (const [path, text] of Object.entries(files)) {
      await mkdir(dirname(join(root, path)), { recursive: true });
      await writeFile(join(root, path), text);
    }
  };

  /** Writes a bundle and its manifest with the CLI's own `manifest create`. */
  const bundle = async (
    root: string,
    id: string,
    created: string,
    files: Record<string, string>,
  ) => {
    await writeFiles(root, files);
    const made = await runCli([
      "manifest",
      "create",
      "--id",
      id,
      "--created",
      created,
      "--force",
      root,
    ]);
    expect(made.code, made.stderr).toBe(0);
  };

  const s3Location = (prefix: string) =>
    `backend: s3, bucket: ${bucket}, prefix: ${prefix}, endpoint: "${server.endpoint}", ` +
    "force_path_style: true, credentials: {access_key_id_env: TEST_S3_KEY, secret_access_key_env: TEST_S3_SECRET}";

  const config = async (text: string) => {
    const path = join(dir, "distributor.yml");
    await writeFile(path, text);
    return path;
  };

  const objectText = async (key: string) => {
    const client = rawClient(server);
    try {
      const response = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
      return await (response.Body as { transformToString(): Promise<string> }).transformToString();
    } finally {
      client.destroy();
    }
  };
  const putObject = async (key: string, body: string) => {
    const client = rawClient(server);
    try {
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body }));
    } finally {
      client.destroy();
    }
  };
  const keysBelow = async (prefix: string) =>
    (await listKeys(server, bucket, `${prefix}/`)).map((key) => key.slice(prefix.length + 1));

  it("publishes local → S3, skips the same bundle on re-run, then replaces it", async () => {
    const prefix = uniqueName("site");
    const source = join(dir, "src");
    await bundle(source, "reports.daily", "2026-06-01T00:00:00Z", {
      "report.md": "# Report\n\nSunny.\n",
      "data/summary.csv": "a,b\n1,2\n",
    });
    const path = await config(
      `pipelines:\n  - id: reports\n    source: {backend: local, path: ${source}}\n    destinations:\n      - {id: bucket, ${s3Location(prefix)}, publish: {source: true, html: true}, transform: {markdown_to_html: {enabled: true}}}\n`,
    );
    const validated = await runCli(["validate", "--config", path, "--pipeline", "reports"]);
    expect(validated.code, validated.stderr).toBe(0);

    const first = await runCli(["run", "--config", path]);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toContain("action=publish_new status=published outputs=3");
    expect((await keysBelow(prefix)).sort()).toEqual([
      ".distributor.json",
      "data/summary.csv",
      "report.html",
      "report.md",
    ]);
    expect(await objectText(`${prefix}/report.md`)).toBe("# Report\n\nSunny.\n");
    const state = JSON.parse(await objectText(`${prefix}/.distributor.json`));
    expect(state).toMatchObject({
      schema_version: 2,
      pipeline_id: "reports",
      destination_id: "bucket",
    });

    const inspected = await runCli([
      "inspect",
      "--config",
      path,
      "--pipeline",
      "reports",
      "--destination",
      "bucket",
      "--format",
      "json",
    ]);
    expect(inspected.code, inspected.stderr).toBe(0);
    expect(inspected.stdout).toContain("reports.daily");

    const second = await runCli(["run", "--config", path]);
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout).toContain("action=skip_same status=skipped");

    await rm(join(source, "data"), { recursive: true });
    await bundle(source, "reports.daily", "2026-06-02T00:00:00Z", {
      "report.md": "# Report\n\nRain.\n",
    });
    const third = await runCli(["run", "--config", path]);
    expect(third.code, third.stderr).toBe(0);
    expect(third.stdout).toContain("action=replace_older status=published");
    expect((await keysBelow(prefix)).sort()).toEqual([
      ".distributor.json",
      "report.html",
      "report.md",
    ]);
    expect(await objectText(`${prefix}/report.md`)).toBe("# Report\n\nRain.\n");
  }, 60_000);

  it("merge keeps outputs the newer bundle no longer has", async () => {
    const prefix = uniqueName("merge");
    const source = join(dir, "src");
    await bundle(source, "daily", "2026-06-01T00:00:00Z", { "a.txt": "a\n", "b.txt": "b\n" });
    const path = await config(
      `pipelines:\n  - id: reports\n    source: {backend: local, path: ${source}}\n    destinations:\n      - {id: bucket, ${s3Location(prefix)}, reconciliation: {mode: merge}}\n`,
    );
    expect((await runCli(["run", "--config", path])).code).toBe(0);
    await rm(join(source, "b.txt"));
    await bundle(source, "daily", "2026-06-02T00:00:00Z", { "a.txt": "a2\n" });
    const merged = await runCli(["run", "--config", path]);
    expect(merged.code, merged.stderr).toBe(0);
    expect((await keysBelow(prefix)).sort()).toEqual([".distributor.json", "a.txt", "b.txt"]);
    expect(await objectText(`${prefix}/a.txt`)).toBe("a2\n");
  }, 60_000);

  it("reads a bundle from S3 and publishes it to a local directory", async () => {
    const prefix = uniqueName("in");
    const staged = join(dir, "staged");
    await bundle(staged, "incoming", "2026-06-03T00:00:00Z", {
      "report.md": "# In\n",
      "x/y.txt": "y\n",
    });
    for (const name of ["report.md", "x/y.txt", "manifest.json"]) {
      await putObject(`${prefix}/batch/${name}`, await readFile(join(staged, name), "utf8"));
    }
    const dest = join(dir, "dest");
    const path = await config(
      `pipelines:\n  - id: fetch\n    source: {${s3Location(prefix)}}\n    destinations:\n      - {id: archive, backend: local, path: ${dest}}\n`,
    );
    const inspected = await runCli([
      "inspect",
      "--config",
      path,
      "--pipeline",
      "fetch",
      "--bundle",
      "batch",
    ]);
    expect(inspected.code, inspected.stderr).toBe(0);
    const result = await runCli(["run", "--config", path]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain(
      "bundle=batch source=incoming action=publish_new status=published",
    );
    expect(await readFile(join(dest, "batch", "report.md"), "utf8")).toBe("# In\n");
    expect(await readFile(join(dest, "batch", "x", "y.txt"), "utf8")).toBe("y\n");
  }, 60_000);

  it("checks a bundle's signature read from S3: a signed bundle publishes, an unsigned or tampered one is refused", async () => {
    const prefix = uniqueName("signed");
    const keys = join(dir, "keys");
    await mkdir(keys);
    const key = join(keys, "producer");
    await exec("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "producer", "-f", key]);
    const publicKey = (await readFile(`${key}.pub`, "utf8")).trim();
    const fingerprint = (await exec("ssh-keygen", ["-l", "-f", `${key}.pub`])).stdout.split(" ")[1];
    await writeFile(join(dir, "allowed_signers"), `ci@example.com ${publicKey}\n`);
    const staged = join(dir, "staged");
    await bundle(staged, "incoming", "2026-06-03T00:00:00Z", { "report.md": "# Signed\n" });
    await exec("ssh-keygen", [
      "-Y",
      "sign",
      "-f",
      key,
      "-n",
      "distributor",
      join(staged, "manifest.json"),
    ]);
    const manifest = await readFile(join(staged, "manifest.json"), "utf8");
    const signature = await readFile(join(staged, "manifest.json.sig"), "utf8");
    // `signed`, `unsigned` and `tampered` (its manifest edited after signing) bundles in one bucket.
    for (const name of ["signed", "unsigned", "tampered"]) {
      await putObject(`${prefix}/${name}/report.md`, "# Signed\n");
      await putObject(
        `${prefix}/${name}/manifest.json`,
        name === "tampered"
          ? manifest.replace("2026-06-03T00:00:00Z", "2026-06-04T00:00:00Z")
          : manifest,
      );
      if (name !== "unsigned") await putObject(`${prefix}/${name}/manifest.json.sig`, signature);
    }
    const dest = join(dir, "dest");
    const path = await config(
      `pipelines:\n  - id: fetch\n    source: {${s3Location(prefix)}, signatures: {allowed_signers: ${join(dir, "allowed_signers")}}}\n    destinations:\n      - {id: archive, backend: local, path: ${dest}}\n`,
    );
    const validated = await runCli([
      "validate",
      "--config",
      path,
      "--pipeline",
      "fetch",
      "--format",
      "json",
    ]);
    expect(validated.code).toBe(1);
    const bundles = JSON.parse(validated.stdout).result.bundles as Array<{
      path: string;
      issues: Array<{ code: string; actual?: string }>;
    }>;
    expect(
      Object.fromEntries(bundles.map((b) => [b.path, b.issues.map((issue) => issue.code)])),
    ).toEqual({ signed: [], tampered: ["signature_invalid"], unsigned: ["signature_missing"] });

    // A pipeline with a refused bundle publishes nothing of it.
    const refused = await runCli(["run", "--config", path, "--format", "json"]);
    expect(refused.code).toBe(1);
    await expect(readFile(join(dest, "signed", "report.md"), "utf8")).rejects.toThrow(/ENOENT/);

    for (const name of ["unsigned", "tampered"]) {
      const client = rawClient(server);
      for (const leaf of ["report.md", "manifest.json", "manifest.json.sig"]) {
        await client.send(
          new DeleteObjectCommand({ Bucket: bucket, Key: `${prefix}/${name}/${leaf}` }),
        );
      }
    }
    const published = await runCli(["run", "--config", path, "--format", "json"]);
    expect(published.code, published.stderr).toBe(0);
    const [action] = JSON.parse(published.stdout).result.actions;
    expect(action).toMatchObject({
      bundle_path: "signed",
      action: "publish_new",
      signer: { principal: "ci@example.com", fingerprint },
    });
    expect(await readFile(join(dest, "signed", "report.md"), "utf8")).toBe("# Signed\n");
    await expect(readFile(join(dest, "signed", "manifest.json.sig"))).rejects.toThrow(/ENOENT/);
  }, 60_000);

  it("reconcile-state records what is really in the bucket; prune --apply deletes aged outputs", async () => {
    const prefix = uniqueName("maint");
    const source = join(dir, "src");
    const path = await config(
      `pipelines:\n  - id: reports\n    source: {backend: local, path: ${source}}\n    destinations:\n      - {id: archive, ${s3Location(prefix)}, reconciliation: {mode: merge}, retention: {prune: {enabled: true, keep_latest: 0, older_than: 1h}}}\n`,
    );
    // A first bundle, then a second without old.txt: merge keeps it, and only it is prunable.
    await bundle(source, "reports.daily", "2026-05-31T00:00:00Z", { "old.txt": "Old\n" });
    expect((await runCli(["run", "--config", path])).code).toBe(0);
    await rm(join(source, "old.txt"));
    await bundle(source, "reports.daily", "2026-06-01T00:00:00Z", {
      "report.md": "# Report\n",
      "summary.txt": "Summary\n",
    });
    expect((await runCli(["run", "--config", path])).code).toBe(0);
    const selector = ["--config", path, "--pipeline", "reports", "--destination", "archive"];

    const client = rawClient(server);
    await client.send(
      new PutObjectCommand({ Bucket: bucket, Key: `${prefix}/extra.txt`, Body: "hand\n" }),
    );
    client.destroy();
    await emptyBucket(server, bucket, `${prefix}/summary.txt`);
    const dry = await runCli(["reconcile-state", ...selector, "--dry-run"]);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toMatch(
      /backend=s3 .*status=would_change checked=3 missing=1 unmanaged=1 dry_run=true/,
    );
    const applied = await runCli(["reconcile-state", ...selector]);
    expect(applied.code, applied.stderr).toBe(0);
    const state = JSON.parse(await objectText(`${prefix}/.distributor.json`));
    expect(state.outputs.map((output: { path: string }) => output.path).sort()).toEqual([
      "old.txt",
      "report.md",
    ]);

    // Age the records, then prune: the merged leftover goes, the publication in force and the
    // hand-placed file stay.
    for (const output of state.outputs) output.updated_at = "2026-01-01T00:00:00Z";
    await putObject(`${prefix}/.distributor.json`, `${JSON.stringify(state, null, 2)}\n`);
    const pruned = await runCli(["prune", ...selector, "--apply"]);
    expect(pruned.code, pruned.stderr).toBe(0);
    expect(pruned.stdout).toContain(
      "status=changed checked=1 planned=1 deleted=1 preserved=0 dry_run=false",
    );
    expect((await keysBelow(prefix)).sort()).toEqual([
      ".distributor.json",
      "extra.txt",
      "report.md",
    ]);
  }, 60_000);

  it("two owners racing on one shared root lose no records", async () => {
    const prefix = uniqueName("shared");
    const pipelines: string[] = [];
    for (const id of ["alpha", "beta"]) {
      const source = join(dir, id);
      await bundle(source, `${id}.bundle`, "2026-06-01T00:00:00Z", { [`${id}.txt`]: `${id}\n` });
      pipelines.push(
        `  - id: ${id}\n    source: {backend: local, path: ${source}}\n    destinations:\n      - {id: site, ${s3Location(prefix)}, state: {mode: shared_root}}\n`,
      );
    }
    const path = await config(`pipelines:\n${pipelines.join("")}`);
    // Both start at once; the lease of docs/design/commit-protocol.md makes one wait for the other, and neither
    // overwrites the other's records.
    const raced = await Promise.all(
      ["alpha", "beta"].map((id) =>
        runCli(["run", "--config", path, "--pipeline", id, "--lock-timeout", "60s"]),
      ),
    );
    for (const result of raced) expect(result.code, result.stderr).toBe(0);
    const state = JSON.parse(await objectText(`${prefix}/.distributor.json`));
    expect(state.schema_version).toBe(3);
    expect(state.owners.map((owner: { pipeline_id: string }) => owner.pipeline_id).sort()).toEqual([
      "alpha",
      "beta",
    ]);
    expect((await keysBelow(prefix)).sort()).toEqual([
      ".distributor.json",
      "alpha.txt",
      "beta.txt",
    ]);
  }, 60_000);

  it("reports wrong credentials and a missing bucket with exit code 1 and a named cause", async () => {
    const source = join(dir, "src");
    await bundle(source, "x", "2026-06-01T00:00:00Z", { "a.txt": "a\n" });
    const missing = uniqueName("absent");
    const path = await config(
      `pipelines:\n  - id: reports\n    source: {backend: local, path: ${source}}\n    destinations:\n      - {id: gone, ${s3Location("p").replace(`bucket: ${bucket}`, `bucket: ${missing}`)}}\n`,
    );
    const result = await runCli(["run", "--config", path]);
    expect(result.code).toBe(1);
    expect(result.stderr + result.stdout).toContain(`bucket "${missing}" does not exist`);

    const denied = await config(
      `pipelines:\n  - id: reports\n    source: {backend: local, path: ${source}}\n    destinations:\n      - {id: bucket, ${s3Location("p").replace("TEST_S3_SECRET", "TEST_S3_WRONG")}}\n`,
    );
    env.TEST_S3_WRONG = "not-the-secret";
    const refused = await runCli(["run", "--config", denied]);
    expect(refused.code).toBe(1);
    expect(refused.stderr + refused.stdout).toMatch(/access denied for s3:\/\//);
  }, 60_000);

  it("a 1 000-file run and its audit print nothing on stderr under --format json but the documented note", async () => {
    const source = join(dir, "many");
    const files = Object.fromEntries(
      Array.from({ length: 1000 }, (_, i) => [`d${i % 10}/f${i}.txt`, `${i}\n`]),
    );
    await bundle(source, "reports.many", "2026-06-04T09:00:00Z", files);
    const prefix = `quiet-${Date.now()}`;
    const path = await config(`pipelines:
  - id: reports
    source: {backend: local, path: ${source}}
    destinations:
      - {id: site, ${s3Location(prefix)}, path_mapping: {mode: fixed}}
`);
    // The one line stderr may hold: the Node 20 note (docs/integrations/s3.md), on Node 20 only.
    const noise = (stderr: string) =>
      stderr
        .split("\n")
        .filter((line) => line !== "" && !line.startsWith("distributor: note: Node.js 20."));
    const published = await runCli(["run", "--config", path, "--format", "json"]);
    expect(published.code, published.stderr).toBe(0);
    expect(noise(published.stderr)).toEqual([]);
    const audited = await runCli(["audit", "--config", path, "--format", "json"]);
    expect(audited.code, audited.stdout).toBe(0);
    expect(noise(audited.stderr)).toEqual([]);
    const repaired = await runCli(["run", "--config", path, "--repair", "--format", "json"]);
    expect(repaired.code, repaired.stderr).toBe(0);
    expect(noise(repaired.stderr)).toEqual([]);
  }, 120_000);
});
