import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  envelopeOf,
  resultOf,
  runCli,
  singlePipelineConfig,
  snapshotTree,
  useTempDir,
  writeBundle,
} from "./helpers.js";

const tmp = useTempDir();

const V1 = { "index.md": "# One\n", "data.csv": "a\n1\n", "old.txt": "old\n" };
const V2 = { "index.md": "# Two\n", "data.csv": "a\n1\n", "new.txt": "new\n" };
const HTML =
  "        publish: {source: true, html: true}\n        transform: {markdown_to_html: {enabled: true}}\n";

/** A source and one destination per name, each with its own config file in `dir`. */
async function setup(names: readonly string[]) {
  const dir = tmp();
  const source = join(dir, "src");
  await writeBundle(source, "site.example", "2026-06-01T00:00:00Z", V1);
  const configs: Record<string, string> = {};
  for (const name of names) {
    configs[name] = join(dir, `${name}.yml`);
    await writeFile(configs[name], singlePipelineConfig(source, join(dir, name), HTML));
    const first = await runCli(["run", "--config", configs[name]]);
    expect(first.code, first.stderr).toBe(0);
  }
  await writeBundle(source, "site.example", "2026-06-02T00:00:00Z", V2);
  return { dir, source, configs };
}

function stateOf(text: string) {
  // Timestamps differ between two runs made at different times; everything else must not.
  return JSON.parse(text.replace(/"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"/g, '"T"'));
}

describe("run --plan-out and apply", () => {
  it("plans without writing, prints the plan for review, and applies it as a plain run would", async () => {
    const { dir, configs } = await setup(["planned", "plain"]);
    const planned = join(dir, "planned");
    const before = await snapshotTree(planned);
    const plan = join(dir, "plan.json");

    const made = await runCli(["run", "--config", configs.planned as string, "--plan-out", plan]);
    expect(made.code, made.stderr).toBe(0);
    expect(await snapshotTree(planned)).toEqual(before);
    expect(made.stdout).toContain(
      "pipeline=reports destination=archive bundle=. source=site.example action=replace_older writes=3 deletes=1",
    );
    expect(made.stdout).toMatch(/^ {2}\+ create {2}new\.txt {2}4 B {2}sha256:[0-9a-f]{12}$/m);
    expect(made.stdout).toMatch(
      /^ {2}~ replace index\.html {2}\d+ B {2}sha256:[0-9a-f]{12} {2}from index\.md$/m,
    );
    expect(made.stdout).toMatch(/^ {2}- delete {3}old\.txt$/m);
    expect(made.stdout).toMatch(/^ {2}state {5}\.distributor\.json {2}schema_version=2 outputs=4/m);
    const document = JSON.parse(await readFile(plan, "utf8"));
    expect(document.format_version).toBe(1);
    expect(document.config_path).toBe(configs.planned);
    const [entry] = document.destinations;
    expect(entry.state_version).toEqual(expect.any(String));
    // data.csv is the same in both sources and stored as recorded: the replacement keeps it.
    expect(entry.writes.map((w: { path: string }) => w.path)).toEqual([
      "index.html",
      "index.md",
      "new.txt",
    ]);
    expect(entry.deletes).toEqual(["old.txt"]);
    expect(entry.source.manifest_id).toBe("site.example");

    // Review: the text rendering, checked against the destination, still writes nothing.
    const review = await runCli(["apply", "--dry-run", plan]);
    expect(review.code, review.stderr).toBe(0);
    expect(review.stdout).toContain("action=replace_older status=planned writes=3");
    const reviewJson = await runCli(["apply", "--dry-run", "--format", "json", plan]);
    expect(reviewJson.code, reviewJson.stderr).toBe(0);
    const reviewed = resultOf(reviewJson);
    expect(reviewed.dry_run).toBe(true);
    expect(reviewed.plan).toEqual(document);
    expect((reviewed.actions as { status: string }[]).map((a) => a.status)).toEqual(["planned"]);
    expect(await snapshotTree(planned)).toEqual(before);

    const applied = await runCli(["apply", plan, "--format", "json"], { cwd: "/" });
    expect(applied.code, applied.stderr).toBe(0);
    const result = resultOf(applied);
    expect(result.plan_file).toBe(plan);
    expect(
      (result.actions as { action: string; status: string }[]).map((a) => [a.action, a.status]),
    ).toEqual([["replace_older", "published"]]);
    const state = await readFile(join(planned, ".distributor.json"), "utf8");
    expect(JSON.parse(state)).toEqual(entry.next_state);

    const plain = await runCli(["run", "--config", configs.plain as string]);
    expect(plain.code, plain.stderr).toBe(0);
    const files = (lines: string[]) => lines.filter((line) => !line.includes(".distributor.json"));
    expect(files(await snapshotTree(planned))).toEqual(
      files(await snapshotTree(join(dir, "plain"))),
    );
    const plainState = await readFile(join(dir, "plain", ".distributor.json"), "utf8");
    expect(stateOf(state)).toEqual(stateOf(plainState));
  }, 60_000);

  it("refuses, writing nothing, once the destination moved on; another destination of the plan still applies", async () => {
    const dir = tmp();
    const source = join(dir, "src");
    await writeBundle(source, "site.example", "2026-06-01T00:00:00Z", V1);
    const config = join(dir, "distributor.yml");
    await writeFile(
      config,
      `${singlePipelineConfig(source, join(dir, "a"))}      - id: mirror\n        backend: local\n        path: ${join(dir, "b")}\n`,
    );
    expect((await runCli(["run", "--config", config])).code).toBe(0);
    await writeBundle(source, "site.example", "2026-06-02T00:00:00Z", V2);
    const plan = join(dir, "plan.json");
    expect((await runCli(["run", "--config", config, "--plan-out", plan])).code).toBe(0);

    // A managed output of `a` disappears: the plan replaced it in place, a run now would create it.
    await rm(join(dir, "a", "index.md"));
    const moved = await snapshotTree(join(dir, "a"));
    const review = await runCli(["apply", "--dry-run", plan]);
    expect(review.code).toBe(1);
    expect(review.stdout).toContain(
      "destination=archive bundle=. source=site.example action=replace_older status=failed",
    );
    expect(review.stdout).toContain("error=plan_stale");

    const applied = await runCli(["apply", plan, "--format", "json"]);
    expect(applied.code).toBe(1);
    const envelope = envelopeOf(applied);
    expect(envelope.ok).toBe(false);
    const actions = envelope.result?.actions as {
      destination_id: string;
      status: string;
      error: { code: string; message: string } | null;
    }[];
    expect(actions.map((a) => [a.destination_id, a.status, a.error?.code ?? null])).toEqual([
      ["archive", "failed", "plan_stale"],
      ["mirror", "published", null],
    ]);
    expect(actions[0]?.error?.message).toMatch(
      /: index\.md: planned overwrite of version \S+ with sha256:[0-9a-f]{64}, now create with sha256:[0-9a-f]{64}; none of plan .*plan\.json was carried out there — make a new plan$/,
    );
    expect(await snapshotTree(join(dir, "a"))).toEqual(moved);
    expect(await readFile(join(dir, "b", "new.txt"), "utf8")).toBe("new\n");

    // Applied once, a plan is spent: the state it wrote is not the one it was planned against.
    const again = await runCli(["apply", plan]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/destination state changed since the plan/);
  }, 60_000);

  it("refuses a plan file it cannot read, naming the file; and checks its command line", async () => {
    const dir = tmp();
    const plan = join(dir, "plan.json");
    await writeFile(plan, '{"format_version": 99, "destinations": []}\n');
    const future = await runCli(["apply", plan, "--format", "json"]);
    expect(future.code).toBe(1);
    expect(envelopeOf(future).error).toEqual({
      code: "plan_format_unsupported",
      message: `plan file ${plan} has format_version 99; this distributor reads format_version 1 only — make the plan again with this version`,
    });
    const missing = await runCli(["apply", join(dir, "absent.json")]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain(`plan file ${join(dir, "absent.json")} cannot be read`);

    const none = await runCli(["apply"]);
    expect([none.code, none.stderr]).toEqual([2, "distributor: apply requires a plan file\n"]);
    const both = await runCli(["run", "--dry-run", "--plan-out", plan]);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain("run accepts --plan-out or --dry-run, not both");
    const forced = await runCli(["run", "--force", "--plan-out", plan]);
    expect(forced.code).toBe(2);
    expect(forced.stderr).toContain("run accepts --plan-out or --force, not both");
    const age = await runCli(["apply", "--max-age", "soon", plan]);
    expect(age.code).toBe(2);
    expect(age.stderr).toMatch(/^distributor: --max-age "soon": /);
  });

  it("writes no plan when a destination could not be planned", async () => {
    const dir = tmp();
    const config = join(dir, "distributor.yml");
    await writeFile(config, singlePipelineConfig(join(dir, "nothing"), join(dir, "dest")));
    const plan = join(dir, "plan.json");
    const result = await runCli([
      "run",
      "--config",
      config,
      "--plan-out",
      plan,
      "--format",
      "json",
    ]);
    expect(result.code).toBe(1);
    const envelope = envelopeOf(result);
    expect(envelope.error?.message).toMatch(new RegExp(`^no plan written to ${plan}: `));
    expect(envelope.result?.plan_file).toBeNull();
    await expect(readFile(plan)).rejects.toThrow(/ENOENT/);
  });

  it("says so, leaving nothing behind, when the plan file cannot be written", async () => {
    const dir = tmp();
    const source = join(dir, "src");
    await writeBundle(source, "site.example", "2026-06-01T00:00:00Z", V1);
    const config = join(dir, "distributor.yml");
    await writeFile(config, singlePipelineConfig(source, join(dir, "dest")));
    // The target is a directory: the temp file is written beside it, and the rename fails.
    const plan = join(dir, "plan.json");
    await mkdir(plan);
    const result = await runCli([
      "run",
      "--config",
      config,
      "--plan-out",
      plan,
      "--format",
      "json",
    ]);
    expect(result.code).toBe(1);
    const envelope = envelopeOf(result);
    expect(envelope.error?.code).toBe("plan_unwritable");
    expect(envelope.error?.message).toMatch(new RegExp(`^plan file ${plan} cannot be written: `));
    expect(await snapshotTree(dir)).not.toContainEqual(expect.stringMatching(/\.tmp /));
    expect(await snapshotTree(plan)).toEqual([]);
    expect(await snapshotTree(join(dir, "dest"))).toEqual([]);
  });

  it("refuses a plan older than --max-age as a whole, naming the file and its age", async () => {
    const { dir, configs } = await setup(["planned"]);
    const plan = join(dir, "plan.json");
    const made = await runCli(["run", "--config", configs.planned as string, "--plan-out", plan]);
    expect(made.code, made.stderr).toBe(0);
    const document = JSON.parse(await readFile(plan, "utf8"));
    const old = new Date(Date.parse(document.planned_at) - 30 * 60 * 60 * 1000).toISOString();
    await writeFile(plan, `${JSON.stringify({ ...document, planned_at: old }, null, 2)}\n`);
    const before = await snapshotTree(join(dir, "planned"));

    const expired = await runCli(["apply", plan, "--format", "json"]);
    expect(expired.code).toBe(1);
    const envelope = envelopeOf(expired);
    expect(envelope.error?.code).toBe("plan_expired");
    expect(envelope.error?.message).toMatch(
      new RegExp(
        `^plan file ${plan} was made 30h\\d*m? ago \\(planned_at ${old.replace(/\./g, "\\.")}\\), more than the maximum age 24h`,
      ),
    );
    const shorter = await runCli(["apply", "--max-age", "2h", plan]);
    expect(shorter.code).toBe(1);
    expect(shorter.stderr).toMatch(/more than the maximum age 2h/);
    expect(await snapshotTree(join(dir, "planned"))).toEqual(before);
  }, 60_000);

  it("saves no plan for two owners of one shared-root state file; one pipeline at a time applies", async () => {
    const dir = tmp();
    const source = join(dir, "src");
    await writeBundle(source, "site.example", "2026-06-01T00:00:00Z", V1);
    const root = join(dir, "shared");
    const owner = (id: string, publish: string) =>
      `  - id: ${id}\n    source: {backend: local, path: ${source}}\n    destinations:\n      - id: shared\n        backend: local\n        path: ${root}\n        state: {mode: shared_root}\n        publish: ${publish}\n        transform: {markdown_to_html: {enabled: true}}\n`;
    const config = join(dir, "distributor.yml");
    await writeFile(
      config,
      `pipelines:\n${owner("copies", "{source: true, html: false}")}${owner("html", "{source: false, html: true}")}`,
    );
    const plan = join(dir, "plan.json");
    const both = await runCli(["run", "--config", config, "--plan-out", plan, "--format", "json"]);
    expect(both.code).toBe(1);
    const envelope = envelopeOf(both);
    expect(envelope.error?.code).toBe("plan_shared_state");
    expect(envelope.error?.message).toMatch(
      /pipeline copies destination shared and pipeline html destination shared share the state file .*--pipeline copies, apply, then --pipeline html/,
    );
    await expect(readFile(plan)).rejects.toThrow(/ENOENT/);
    expect(await snapshotTree(root)).toEqual([]);

    for (const id of ["copies", "html"]) {
      const made = await runCli(["run", "--config", config, "--pipeline", id, "--plan-out", plan]);
      expect(made.code, made.stderr).toBe(0);
      const applied = await runCli(["apply", plan]);
      expect(applied.code, applied.stderr).toBe(0);
      expect(applied.stdout).toContain(`pipeline=${id} destination=shared`);
    }
    expect((await snapshotTree(root)).map((line) => line.split(" ")[1])).toEqual([
      ".distributor.json",
      "data.csv",
      "index.html",
      "index.md",
      "old.txt",
    ]);
  }, 60_000);
});
