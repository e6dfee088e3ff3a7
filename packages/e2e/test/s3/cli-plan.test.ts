import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { GetObjectCommand } from "@aws-sdk/client-s3";
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

// Saved plans (`run --plan-out`, `apply`) through the real CLI process against Ceph RGW.

const found = s3Server();

describe.skipIf(found === undefined)(
  "distributor run --plan-out and apply with S3 (Ceph RGW)",
  () => {
    const server = found as S3Server;
    const env: Record<string, string> = {
      TEST_S3_KEY: found?.accessKeyId ?? "",
      TEST_S3_SECRET: found?.secretAccessKey ?? "",
    };
    let bucket = "";
    let dir = "";

    beforeAll(async () => {
      bucket = await createBucket(server, "plan");
    });
    afterAll(async () => {
      if (bucket) await emptyBucket(server, bucket, "", true);
    });
    beforeEach(async () => {
      dir = await mkdtemp(join(tmpdir(), "distributor-s3-plan-"));
    });
    afterEach(async () => {
      await rm(dir, { recursive: true, force: true });
    });

    const runCli = (args: readonly string[]) => runCliIn(dir, env, args);

    /** Replaces the source bundle with `files`, its manifest written by `manifest create`. */
    const bundle = async (root: string, created: string, files: Record<string, string>) => {
      await rm(root, { recursive: true, force: true });
      for (const [path, text] of Object.entries(files)) {
        await mkdir(dirname(join(root, path)), { recursive: true });
        await writeFile(join(root, path), text);
      }
      const made = await runCli([
        "manifest",
        "create",
        "--id",
        "site.example",
        "--created",
        created,
        root,
      ]);
      expect(made.code, made.stderr).toBe(0);
    };

    const s3Location = (prefix: string) =>
      `backend: s3, bucket: ${bucket}, prefix: ${prefix}, endpoint: "${server.endpoint}", ` +
      "force_path_style: true, credentials: {access_key_id_env: TEST_S3_KEY, secret_access_key_env: TEST_S3_SECRET}";

    /** Every object below `prefix` with its text. */
    const objects = async (prefix: string) => {
      const client = rawClient(server);
      try {
        const texts: Record<string, string> = {};
        for (const key of (await listKeys(server, bucket, `${prefix}/`)).sort()) {
          const response = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
          texts[key.slice(prefix.length + 1)] = await (
            response.Body as { transformToString(): Promise<string> }
          ).transformToString();
        }
        return texts;
      } finally {
        client.destroy();
      }
    };

    const untimed = (text: string | undefined) =>
      JSON.parse((text ?? "").replace(/"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"/g, '"T"'));

    it("applies a saved plan as a plain run would, and refuses it with nothing written once the destination moved on", async () => {
      const planned = uniqueName("planned");
      const plain = uniqueName("plain");
      const source = join(dir, "src");
      const site = (version: string) => ({
        "index.md": `# Site ${version}\n`,
        "style.css": "body {}\n",
        [`${version}.txt`]: `${version}\n`,
      });
      await bundle(source, "2026-06-01T00:00:00Z", site("one"));
      const configFor = async (prefix: string, name: string) => {
        const path = join(dir, name);
        await writeFile(
          path,
          `pipelines:\n  - id: reports\n    source: {backend: local, path: ${source}}\n    destinations:\n      - {id: bucket, ${s3Location(prefix)}, publish: {source: true, html: true}, transform: {markdown_to_html: {enabled: true}}}\n`,
        );
        return path;
      };
      const plannedConfig = await configFor(planned, "planned.yml");
      const plainConfig = await configFor(plain, "plain.yml");
      for (const path of [plannedConfig, plainConfig]) {
        const first = await runCli(["run", "--config", path]);
        expect(first.code, first.stderr).toBe(0);
      }
      await bundle(source, "2026-06-02T00:00:00Z", site("two"));

      const before = await objects(planned);
      const plan = join(dir, "plan.json");
      const made = await runCli(["run", "--config", plannedConfig, "--plan-out", plan]);
      expect(made.code, made.stderr).toBe(0);
      // style.css is the same in both sources: the replacement keeps it.
      expect(made.stdout).toContain("action=replace_older writes=3 deletes=1");
      expect(made.stdout).toMatch(/^ {2}- delete {3}one\.txt$/m);
      expect(await objects(planned)).toEqual(before);
      const entry = JSON.parse(await readFile(plan, "utf8")).destinations[0];
      // On S3 the state version planned against is the state object's ETag.
      expect(entry.state_version).toMatch(/^"?[0-9a-f]{32}"?$/);

      const applied = await runCli(["apply", plan]);
      expect(applied.code, applied.stderr).toBe(0);
      expect(applied.stdout).toContain("action=replace_older status=published outputs=3");
      const after = await objects(planned);
      expect(JSON.parse(after[".distributor.json"] ?? "")).toEqual(entry.next_state);
      const plainRun = await runCli(["run", "--config", plainConfig]);
      expect(plainRun.code, plainRun.stderr).toBe(0);
      const { ".distributor.json": appliedState, ...appliedFiles } = after;
      const { ".distributor.json": plainState, ...plainFiles } = await objects(plain);
      expect(appliedFiles).toEqual(plainFiles);
      expect(untimed(appliedState)).toEqual(untimed(plainState));

      // A second plan; then the source moves on and another run publishes it.
      await bundle(source, "2026-06-03T00:00:00Z", site("three"));
      const stale = join(dir, "stale.json");
      expect((await runCli(["run", "--config", plannedConfig, "--plan-out", stale])).code).toBe(0);
      await bundle(source, "2026-06-04T00:00:00Z", site("four"));
      expect((await runCli(["run", "--config", plannedConfig])).code).toBe(0);
      const moved = await objects(planned);
      const refused = await runCli(["apply", stale, "--format", "json"]);
      expect(refused.code).toBe(1);
      const action = JSON.parse(refused.stdout).result.actions[0];
      expect([action.status, action.error.code]).toEqual(["failed", "source_changed"]);
      expect(await objects(planned)).toEqual(moved);

      // The planned source again, but the state at the destination changed since the plan.
      await bundle(source, "2026-06-03T00:00:00Z", site("three"));
      const refusedState = await runCli(["apply", stale, "--format", "json"]);
      expect(refusedState.code).toBe(1);
      const stateAction = JSON.parse(refusedState.stdout).result.actions[0];
      expect(stateAction.error.code).toBe("plan_stale");
      expect(stateAction.error.message).toMatch(/destination state changed since the plan/);
      expect(await objects(planned)).toEqual(moved);
    }, 120_000);
  },
);
