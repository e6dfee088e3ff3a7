import { mkdir, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  type CliResult,
  envelopeOf,
  resultOf,
  runCli,
  sha256Of,
  singlePipelineConfig,
  snapshotTree,
  useTempDir,
  writeBundle,
  writeFiles,
} from "./helpers.js";

// Regression tests of publishing safety, each through the real CLI process on the local backend.

const tmp = useTempDir();

const sha256 = sha256Of;
const bundle = writeBundle;

async function config(text: string): Promise<string> {
  const path = join(tmp(), "distributor.yml");
  await writeFile(path, text);
  return path;
}

interface Action {
  pipeline_id: string;
  destination_id: string;
  bundle_path: string;
  action: string | null;
  status: string;
  reason: string;
  primary_url: string | null;
  release_id: string | null;
  preview_url: string | null;
  error: { code: string; message: string } | null;
  outputs: Array<Record<string, unknown>>;
  signer: { principal: string; fingerprint: string } | null;
  warnings: Array<{ code: string; message: string; paths: string[] }>;
}

function actionsOf(result: CliResult): Action[] {
  return resultOf(result).actions as Action[];
}

async function runJson(configPath: string, ...flags: string[]): Promise<CliResult> {
  return runCli(["run", "--config", configPath, "--format", "json", ...flags]);
}

async function stateOf(dir: string): Promise<Record<string, unknown>> {
  return JSON.parse(await readFile(join(dir, ".distributor.json"), "utf8"));
}

const singleDestination = singlePipelineConfig;

describe("each bundle publishes its own HTML", () => {
  it("renders r.md of a/x and of b separately under preserve_relative", async () => {
    const source = join(tmp(), "src");
    const dest = join(tmp(), "dest");
    await bundle(join(source, "a", "x"), "a", "2026-06-04T10:00:00Z", { "r.md": "# From A\n" });
    await bundle(join(source, "b"), "b", "2026-06-04T10:00:00Z", { "r.md": "# From B\n" });
    const configPath = await config(
      singleDestination(
        source,
        dest,
        `        publish: {source: true, html: true}
        transform: {markdown_to_html: {enabled: true}}
`,
      ),
    );

    const result = await runJson(configPath);

    expect(result.code, result.stderr).toBe(0);
    const a = await readFile(join(dest, "a", "x", "r.html"), "utf8");
    const b = await readFile(join(dest, "b", "r.html"), "utf8");
    expect(a).toContain("<h1>From A</h1>");
    expect(b).toContain("<h1>From B</h1>");
    expect(b).not.toContain("From A");
    const recorded = (await stateOf(join(dest, "b"))).outputs as Array<{
      path: string;
      sha256: string;
    }>;
    expect(recorded.find((o) => o.path === "r.html")?.sha256).toBe(sha256(b));
    const reported = actionsOf(result).find((action) => action.bundle_path === "b");
    expect(reported?.outputs.find((o) => o.path === "r.html")?.sha256).toBe(sha256(b));
  });
});

describe("a replacement refused for unmanaged content changes nothing", () => {
  const setup = async () => {
    const source = join(tmp(), "src");
    const dest = join(tmp(), "dest");
    await bundle(source, "reports", "2026-06-04T10:00:00Z", { "report.md": "v1\n" });
    const configPath = await config(singleDestination(source, dest));
    const first = await runJson(configPath);
    expect(first.code, first.stderr).toBe(0);
    // A newer source replaces the publication.
    await bundle(source, "reports", "2026-06-05T10:00:00Z", { "report.md": "v2\n" });
    return { source, dest, configPath };
  };

  const cases: Array<[string, (dest: string) => Promise<void>, string]> = [
    ["an empty directory", (dest) => mkdir(join(dest, "empty")), "empty/"],
    [
      "a file whose name is not UTF-8",
      (dest) => writeFile(Buffer.from(`${dest}/odd\xff.txt`, "latin1"), "x"),
      "odd\\xff.txt",
    ],
    ["a symlink", (dest) => symlink("/etc/hostname", join(dest, "link")), "link"],
    ["an unmanaged file", (dest) => writeFile(join(dest, "notes.txt"), "mine"), "notes.txt"],
  ];

  for (const [what, add, shown] of cases) {
    it(`refuses with ${what} in the bundle path, leaving the destination identical`, async () => {
      const { dest, configPath } = await setup();
      await add(dest);
      const before = await snapshotTree(dest);

      const result = await runJson(configPath);

      expect(result.code).toBe(1);
      const [action] = actionsOf(result);
      expect(action?.action).toBe("fail_unmanaged");
      expect(action?.status).toBe("failed");
      expect(action?.reason).toContain(shown);
      expect(await snapshotTree(dest)).toEqual(before);
      // Nothing is wedged: the next run refuses the same way, and --force replaces.
      const again = await runJson(configPath);
      expect(actionsOf(again)[0]?.action).toBe("fail_unmanaged");
      const forced = await runJson(configPath, "--force");
      expect(forced.code, forced.stderr).toBe(0);
      expect(actionsOf(forced)[0]?.action).toBe("force_replace");
      expect(await readFile(join(dest, "report.md"), "utf8")).toBe("v2\n");
      expect((await snapshotTree(dest)).map((line) => line.split(" ")[1])).toEqual([
        ".distributor.json",
        "report.md",
      ]);
    });
  }
});

describe("names no bundle may hold", () => {
  it("makes a bundle holding sub\\xff/manifest.json invalid for validate, inspect and manifest create", async () => {
    const dir = join(tmp(), "bundle");
    await bundle(dir, "reports", "2026-06-04T10:00:00Z", { "report.md": "x\n" });
    await mkdir(Buffer.from(`${dir}/sub\xff`, "latin1"));
    await writeFile(Buffer.from(`${dir}/sub\xff/manifest.json`, "latin1"), "{}");

    const validate = await runCli(["validate", "--format", "json", dir]);
    expect(validate.code).toBe(1);
    expect(envelopeOf(validate).error?.message).toContain("sub\\xff: name is not valid UTF-8");

    const text = await runCli(["validate", dir]);
    expect(text.code).toBe(1);
    expect(text.stderr).toContain("sub\\xff: name is not valid UTF-8");

    const inspect = await runCli(["inspect", "--format", "json", dir]);
    expect(inspect.code).toBe(1);
    expect(inspect.stdout).toContain("sub\\\\xff");

    const create = await runCli(["manifest", "create", "--id", "x", "--force", dir]);
    expect(create.code).toBe(1);
    expect(create.stderr).toContain("sub\\xff");
  });

  it("refuses a bundle that lists sub/.distributor.json and publishes nothing", async () => {
    const source = join(tmp(), "src");
    const dest = join(tmp(), "dest");
    await bundle(source, "reports", "2026-06-04T10:00:00Z", {
      "report.md": "x\n",
      "sub/.distributor.json": "{}",
    });
    const configPath = await config(singleDestination(source, dest));

    const validate = await runCli(["validate", "--format", "json", source]);
    expect(validate.code).toBe(1);
    expect(validate.stdout).toContain(".distributor.json is reserved");

    const result = await runJson(configPath);
    expect(result.code).toBe(1);
    expect(envelopeOf(result).error?.code).toBe("bundle_invalid");
    expect(await snapshotTree(dest)).toEqual([]);
  });

  it("counts odd names at a destination as unmanaged entries in reconcile-state", async () => {
    const source = join(tmp(), "src");
    const dest = join(tmp(), "dest");
    await bundle(source, "reports", "2026-06-04T10:00:00Z", { "report.md": "x\n" });
    const configPath = await config(singleDestination(source, dest));
    expect((await runJson(configPath)).code).toBe(0);
    await writeFile(Buffer.from(`${dest}/odd\xfe.txt`, "latin1"), "x");

    const result = await runCli([
      "reconcile-state",
      "--config",
      configPath,
      "--pipeline",
      "reports",
      "--destination",
      "archive",
      "--dry-run",
      "--format",
      "json",
    ]);
    expect(result.code, result.stderr).toBe(0);
    expect(resultOf(result).unmanaged_entries).toEqual([
      { path: "odd\\xfe.txt", type: "file", size: 1 },
    ]);
  });
});

describe("--force overrides planning refusals", () => {
  it("claims a merge collision with an unmanaged path", async () => {
    const source = join(tmp(), "src");
    const dest = join(tmp(), "dest");
    await bundle(source, "reports", "2026-06-04T10:00:00Z", { "report.md": "v1\n" });
    const configPath = await config(
      singleDestination(source, dest, "        reconciliation: {mode: merge}\n"),
    );
    expect((await runJson(configPath)).code).toBe(0);
    await bundle(source, "reports", "2026-06-05T10:00:00Z", {
      "report.md": "v2\n",
      "notes.txt": "from the bundle\n",
    });
    await writeFile(join(dest, "notes.txt"), "unmanaged");
    const before = await snapshotTree(dest);

    const refused = await runJson(configPath);
    expect(actionsOf(refused)[0]?.action).toBe("fail_unmanaged");
    expect(await snapshotTree(dest)).toEqual(before);

    const forced = await runJson(configPath, "--force");
    expect(forced.code, forced.stderr).toBe(0);
    expect(actionsOf(forced)[0]?.action).toBe("force_replace");
    expect(await readFile(join(dest, "notes.txt"), "utf8")).toBe("from the bundle\n");
  });

  it("claims a shared-root collision with an unmanaged path, bounded to the destination path", async () => {
    const source = join(tmp(), "src");
    const other = join(tmp(), "other");
    const root = join(tmp(), "site");
    const dest = join(root, "shared");
    await bundle(source, "reports", "2026-06-04T10:00:00Z", { "report.md": "v1\n" });
    await bundle(other, "other", "2026-06-04T10:00:00Z", { "other.md": "other\n" });
    await writeFiles(root, { "sibling.txt": "outside the destination" });
    const shared = (id: string, path: string) =>
      `  - id: ${id}\n    source: {backend: local, path: ${path}}\n    destinations:\n      - {id: site, backend: local, path: ${dest}, state: {mode: shared_root}}\n`;
    const configPath = await config(
      `pipelines:\n${shared("other", other)}${shared("reports", source)}`,
    );
    expect((await runJson(configPath, "--pipeline", "other")).code).toBe(0);
    await writeFile(join(dest, "report.md"), "unmanaged");
    const before = await snapshotTree(dest);

    const refused = await runJson(configPath, "--pipeline", "reports");
    expect(actionsOf(refused)[0]?.action).toBe("fail_unmanaged");
    expect(actionsOf(refused)[0]?.reason).toContain("report.md exists but is not managed");
    expect(await snapshotTree(dest)).toEqual(before);

    const forced = await runJson(configPath, "--pipeline", "reports", "--force");
    expect(forced.code, forced.stderr).toBe(0);
    expect(actionsOf(forced)[0]?.action).toBe("force_replace");
    expect(await readFile(join(dest, "report.md"), "utf8")).toBe("v1\n");
    // A forced replacement clears the destination bundle path, other owners included, and
    // nothing outside it.
    expect((await snapshotTree(dest)).map((line) => line.split(" ")[1])).toEqual([
      ".distributor.json",
      "report.md",
    ]);
    expect(await readFile(join(root, "sibling.txt"), "utf8")).toBe("outside the destination");
    const state = await stateOf(dest);
    expect(state.schema_version).toBe(3);
    expect((state.owners as unknown[]).length).toBe(1);
  });

  it("never republishes an identical source, even with on_destination_same: fail", async () => {
    const source = join(tmp(), "src");
    const dest = join(tmp(), "dest");
    await bundle(source, "reports", "2026-06-04T10:00:00Z", { "report.md": "v1\n" });
    const configPath = await config(
      singleDestination(source, dest, "        transfer: {on_destination_same: fail}\n"),
    );
    expect((await runJson(configPath)).code).toBe(0);
    const before = await snapshotTree(dest);

    for (const flags of [[], ["--force"]]) {
      const result = await runJson(configPath, ...flags);
      expect(result.code).toBe(1);
      const [action] = actionsOf(result);
      expect(action?.action).toBe("fail_conflict");
      expect(action?.reason).toContain("transfer.on_destination_same is fail");
    }
    expect(await snapshotTree(dest)).toEqual(before);
  });
});

describe("destination problems caught while planning", () => {
  it("refuses a destination path that is a regular file, naming it", async () => {
    const source = join(tmp(), "src");
    const dest = join(tmp(), "dest-file");
    await bundle(source, "reports", "2026-06-04T10:00:00Z", { "report.md": "v1\n" });
    await writeFile(dest, "not a directory");
    const configPath = await config(singleDestination(source, dest));

    const result = await runJson(configPath);

    expect(result.code).toBe(1);
    const [action] = actionsOf(result);
    expect(action?.action).toBeNull();
    expect(action?.status).toBe("failed");
    expect(action?.error).toEqual({
      code: "conflict",
      message: expect.stringContaining(`root ${dest} is not a directory`),
    });
    expect(await readFile(dest, "utf8")).toBe("not a directory");
  });

  it("reports every docs/cli.md action field, null where empty", async () => {
    const source = join(tmp(), "src");
    const dest = join(tmp(), "dest");
    await bundle(source, "reports", "2026-06-04T10:00:00Z", { "report.md": "v1\n" });
    const configPath = await config(singleDestination(source, dest));

    const [published] = actionsOf(await runJson(configPath));
    const [skipped] = actionsOf(await runJson(configPath));

    for (const action of [published, skipped]) {
      expect(Object.keys(action ?? {}).sort()).toEqual(
        [
          "action",
          "bundle_path",
          "destination_id",
          "error",
          "outputs",
          "pipeline_id",
          "preview_url",
          "primary_url",
          "reason",
          "release_id",
          "signer",
          "source_id",
          "status",
          "warnings",
        ].sort(),
      );
      expect(action?.primary_url).toBeNull();
      expect(action?.release_id).toBeNull();
      expect(action?.preview_url).toBeNull();
      expect(action?.error).toBeNull();
      expect(action?.signer).toBeNull();
      expect(action?.warnings).toEqual([]);
    }
    expect(published?.outputs).toEqual([
      {
        path: "report.md",
        kind: "source",
        source_path: "report.md",
        transform: null,
        url: null,
        sha256: sha256("v1\n"),
        size: 3,
      },
    ]);
  });
});

describe("operator-facing messages", () => {
  it("says a bundle is invalid once, and validate prints at most 20 problems", async () => {
    const source = join(tmp(), "src");
    await bundle(source, "reports", "2026-06-04T10:00:00Z", { "report.md": "x\n" });
    await writeFiles(
      source,
      Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`extra/${i}.txt`, "x"])),
    );
    const configPath = await config(singleDestination(source, join(tmp(), "dest")));

    const run = await runCli(["run", "--config", configPath]);
    expect(run.code).toBe(1);
    const lines = run.stderr.trim().split("\n");
    expect(lines[0]).toMatch(
      /^distributor: pipeline reports: bundle \. is invalid \(30 problems\)/,
    );
    expect(run.stderr.match(/is invalid/g)).toHaveLength(1);

    const validate = await runCli(["validate", source]);
    expect(validate.code).toBe(1);
    const printed = validate.stderr.trim().split("\n");
    expect(printed.filter((line) => line.includes("present but not listed"))).toHaveLength(20);
    expect(printed).toContain("distributor: ... and 10 more");
  });

  it("names the state file and says state when it does not parse", async () => {
    const source = join(tmp(), "src");
    const dest = join(tmp(), "dest");
    await bundle(source, "reports", "2026-06-04T10:00:00Z", { "report.md": "x\n" });
    await writeFiles(dest, { ".distributor.json": "not json\n{" });
    const configPath = await config(singleDestination(source, dest));

    const result = await runJson(configPath);
    expect(result.code).toBe(1);
    const [action] = actionsOf(result);
    expect(action?.action).toBe("fail_conflict");
    expect(action?.reason).toContain(
      `state file local:${dest}/.distributor.json is not valid state`,
    );
    expect(action?.reason).not.toContain("\n");
    expect(action?.reason).not.toContain("not json");
    // The code says what is wrong, and the reason what fixes it.
    expect(action?.error).toMatchObject({ code: "state_invalid" });
    expect(action?.reason).toContain("`distributor reconcile-state --rebuild` replaces it");
  });

  it("says nothing ran when every pipeline is an http_upload", async () => {
    const dest = join(tmp(), "dest");
    const configPath = await config(`upload_tokens:
  - {id: producer, token_env: DISTRIBUTOR_TEST_TOKEN, allow_pipelines: [uploads]}
pipelines:
  - id: uploads
    source: {backend: http_upload}
    destinations:
      - {id: archive, backend: local, path: ${dest}}
`);
    const result = await runCli(["run", "--config", configPath]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("nothing ran");
    expect(result.stderr).toContain("distributor serve");
    expect(result.stderr).not.toContain("upload the bundle again");
    // --repair cannot restore what an upload published: the message says what does.
    const repair = await runCli(["run", "--config", configPath, "--repair"]);
    expect(repair.code).toBe(1);
    expect(repair.stderr).toContain("nothing ran");
    expect(repair.stderr).toContain("upload the bundle again (distributor upload)");
    const named = await runCli([
      "run",
      "--config",
      configPath,
      "--repair",
      "--pipeline",
      "uploads",
    ]);
    expect(named.code).toBe(1);
    expect(named.stderr).toContain("pipeline uploads has an http_upload source");
    expect(named.stderr).toContain("upload the bundle again (distributor upload)");
  });

  it("names the configured S3 location when the service cannot be reached", async () => {
    // (An unregistered backend's message is covered by the publish workflow tests: the CLI now
    // registers every backend the configuration accepts.) Port 9 on loopback refuses connections.
    const source = join(tmp(), "src");
    await bundle(source, "reports", "2026-06-04T10:00:00Z", { "report.md": "x\n" });
    const configPath = await config(`pipelines:
  - id: reports
    source: {backend: local, path: ${source}}
    destinations:
      - id: bucket
        backend: s3
        bucket: reports-bucket
        prefix: archive
        endpoint: http://127.0.0.1:9
        force_path_style: true
        credentials: {access_key_id_env: TEST_S3_KEY, secret_access_key_env: TEST_S3_SECRET}
`);
    const result = await runCli(["run", "--config", configPath, "--format", "json"], {
      env: { TEST_S3_KEY: "key", TEST_S3_SECRET: "secret" },
    });
    expect(result.code).toBe(1);
    const error = actionsOf(result)[0]?.error;
    expect(error?.code).toBe("unavailable");
    expect(error?.message).toContain("request for s3://reports-bucket/archive/");
    expect(error?.message).toContain("failed (ECONNREFUSED");
  });
});

describe("max_deletes", () => {
  it("refuses a plan that deletes more than it allows, until --allow-deletes allows that many", async () => {
    const source = join(tmp(), "src");
    const dest = join(tmp(), "dest");
    const many = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`f${i}.txt`, `${i}\n`]));
    await bundle(source, "reports", "2026-06-04T10:00:00Z", many);
    const configPath = await config(
      `${singleDestination(source, dest)}        max_deletes: "20%"\n`,
    );
    expect((await runJson(configPath)).code).toBe(0);
    // The next bundle keeps only three of the ten files: seven deletes, where 20 % allows two.
    await rm(source, { recursive: true, force: true });
    await bundle(source, "reports", "2026-06-05T10:00:00Z", {
      "f0.txt": "0\n",
      "f1.txt": "1\n",
      "f2.txt": "2\n",
    });
    const refused = await runJson(configPath);
    expect(refused.code).toBe(1);
    const [action] = actionsOf(refused);
    expect(action?.action).toBe("fail_conflict");
    expect(action?.error?.code).toBe("too_many_deletes");
    expect(action?.reason).toContain(
      "deletes 7 managed output(s), more than max_deletes 20% (2 of 10)",
    );
    expect(action?.reason).toContain("--allow-deletes 7");
    expect((await readdir(dest)).filter((name) => name.startsWith("f")).length).toBe(10);
    // Allowed fewer than it needs: still refused; allowed enough: published.
    expect((await runJson(configPath, "--allow-deletes", "6")).code).toBe(1);
    const allowed = await runJson(configPath, "--allow-deletes", "7");
    expect(allowed.code, allowed.stdout).toBe(0);
    expect((await readdir(dest)).sort()).toEqual([
      ".distributor.json",
      "f0.txt",
      "f1.txt",
      "f2.txt",
    ]);
    const bad = await runCli(["run", "--config", configPath, "--allow-deletes", "many"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--allow-deletes must be a whole number of outputs");
  });

  it("calls a percentage above 100 out of range, naming the key and the value, and runs nothing", async () => {
    const source = join(tmp(), "src");
    const dest = join(tmp(), "dest");
    await bundle(source, "reports", "2026-06-04T10:00:00Z", { "f0.txt": "0\n" });
    const configPath = await config(
      `${singleDestination(source, dest)}        max_deletes: "150%"\n`,
    );

    const [text, json] = await Promise.all([
      runCli(["run", "--config", configPath]),
      runJson(configPath),
    ]);

    const problem =
      'pipelines[0].destinations[0].max_deletes must be a percentage from 0% to 100% of the managed outputs; "150%" is out of range';
    expect(text.code).toBe(1);
    expect(text.stderr).toBe(`distributor: ${configPath}: ${problem}\n`);
    expect(json.code).toBe(1);
    expect(envelopeOf(json).error).toEqual({
      code: "config_invalid",
      message: `${configPath}: ${problem}`,
    });
    await expect(readdir(dest)).rejects.toMatchObject({ code: "ENOENT" });
  });
});
