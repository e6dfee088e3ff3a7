import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { writeSourceBundle } from "@distributor/engine/testing";
import { createLocalBackend } from "@distributor/storage";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type Config, parseConfig } from "../../src/config/index.js";
import { applyPlan } from "../../src/plan-file/apply.js";
import { encodePlan, loadPlan, parsePlan, savePlan } from "../../src/plan-file/codec.js";
import { PLAN_FORMAT_VERSION, type SavedPlan } from "../../src/plan-file/saved-plan.js";
import { planRun } from "../../src/run/plan-run.js";
import { run, runSucceeded } from "../../src/run/run.js";

const V1 = { "a.md": "# A one\n", "b.txt": "b one\n", "docs/c.txt": "c one\n" };
const V2 = { "a.md": "# A two\n", "b.txt": "b one\n", "d.txt": "d two\n" };
const V3 = { "a.md": "# A three\n", "e.txt": "e three\n" };
const T1 = new Date("2026-06-04T10:00:00Z");
const T2 = new Date("2026-06-04T11:00:00Z");
/** When the tests apply their plans: within a day of them. */
const APPLIED = new Date("2026-06-04T12:00:00Z");

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "distributor-saved-plan-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Every file below `root` (relative path → text); `.distributor.json` included. */
async function tree(root: string): Promise<Record<string, string>> {
  const files: Record<string, string> = {};
  const entries = await readdir(root, { recursive: true, withFileTypes: true }).catch(() => []);
  for (const entry of entries) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    files[path.slice(root.length + 1)] = await readFile(path, "utf8");
  }
  return files;
}

async function source(name: string, files: Record<string, string>, hour: number) {
  const root = join(dir, name);
  await writeSourceBundle(createLocalBackend({ root }), "", files, {
    id: "reports.example",
    created: new Date(Date.UTC(2026, 5, 4, hour)),
  });
  return root;
}

/** One pipeline `reports` with html rendering, publishing `from` to each of `destinations`. */
function config(from: string, destinations: Record<string, string>, extra = ""): Config {
  const listed = Object.entries(destinations)
    .map(
      ([id, path]) =>
        `      - id: ${id}\n        backend: local\n        path: ${path}\n        publish: {source: true, html: true}\n        transform: {markdown_to_html: {enabled: true}}\n${extra}`,
    )
    .join("");
  return parseConfig(
    `pipelines:\n  - id: reports\n    source: {backend: local, path: ${from}}\n    destinations:\n${listed}`,
    { sourceName: join(dir, "distributor.yml") },
  );
}

async function publish(cfg: Config, now: Date) {
  const report = await run({ config: cfg, now: () => now });
  expect(runSucceeded(report), JSON.stringify(report.actions)).toBe(true);
}

/** `applyPlan` shortly after the plans were made. */
function apply(options: Parameters<typeof applyPlan>[0]) {
  return applyPlan({ now: () => APPLIED, ...options });
}

async function planned(cfg: Config, now: Date): Promise<SavedPlan> {
  const { report, plan } = await planRun({ config: cfg, now: () => now });
  expect(report.dry_run).toBe(true);
  expect(plan).not.toBeNull();
  return plan as SavedPlan;
}

describe("saved plans", () => {
  it("planning writes nothing, and applying the saved plan leaves what a plain run leaves", async () => {
    const v1 = await source("v1", V1, 1);
    const v2 = await source("v2", V2, 2);
    const a = join(dir, "a");
    const b = join(dir, "b");
    // Two destinations in the same place: A gets the saved plan applied, B a plain run.
    await publish(config(v1, { archive: a }), T1);
    await publish(config(v1, { archive: b }), T1);
    const before = await tree(a);

    const plan = await planned(config(v2, { archive: a }), T2);
    expect(await tree(a)).toEqual(before);
    const [entry] = plan.destinations;
    expect(entry?.action).toBe("replace_older");
    // b.txt is the same in both sources and stored as recorded: the replacement keeps it.
    expect(entry?.writes.map((w) => [w.path, w.overwrite])).toEqual([
      ["a.html", true],
      ["a.md", true],
      ["d.txt", false],
    ]);
    expect(entry?.deletes).toEqual(["docs/c.txt"]);
    expect(entry?.state_version).not.toBeNull();

    // Through the file, as an operator would.
    const file = join(dir, "plan.json");
    await savePlan(file, plan);
    const loaded = await loadPlan(file);
    expect(loaded).toEqual(plan);
    const applied = await apply({
      plan: loaded,
      config: config(v2, { archive: a }),
      planName: file,
    });
    expect(applied.actions.map((x) => [x.action, x.status, x.error])).toEqual([
      ["replace_older", "published", null],
    ]);
    await publish(config(v2, { archive: b }), T2);
    const result = await tree(a);
    expect(result).toEqual(await tree(b));
    expect(Object.keys(result).sort()).toEqual([
      ".distributor.json",
      "a.html",
      "a.md",
      "b.txt",
      "d.txt",
    ]);
    // The state is byte for byte the one the plan showed.
    expect(JSON.parse(result[".distributor.json"] ?? "")).toEqual(entry?.next_state);
  });

  const POLICIES = [
    { name: "a merge", action: "replace_older", extra: "        reconciliation: {mode: merge}\n" },
    {
      name: "a shared root",
      action: "replace_older",
      extra: "        state: {mode: shared_root}\n",
    },
    {
      name: "a repair",
      action: "repair",
      repair: true,
      same: true,
      prepare: async (root: string) => {
        await rm(join(root, "docs", "c.txt"));
        await writeFile(join(root, "b.txt"), "edited by hand\n");
      },
    },
  ];
  it.each(POLICIES)(
    "applying $name leaves what a plain run leaves, byte for byte",
    async (policy) => {
      const v1 = await source("v1", V1, 1);
      const next = policy.same ? v1 : await source("v2", V2, 2);
      const a = join(dir, "a");
      const b = join(dir, "b");
      const extra = policy.extra ?? "";
      for (const root of [a, b]) {
        await publish(config(v1, { archive: root }, extra), T1);
        await policy.prepare?.(root);
      }
      const flags = { repair: policy.repair ?? false };
      const { plan } = await planRun({
        config: config(next, { archive: a }, extra),
        now: () => T2,
        ...flags,
      });
      if (plan === null) throw new Error("no plan");
      const applied = await apply({ plan, config: config(next, { archive: a }, extra) });
      expect(applied.actions.map((x) => [x.action, x.error])).toEqual([[policy.action, null]]);
      const plain = await run({
        config: config(next, { archive: b }, extra),
        now: () => T2,
        ...flags,
      });
      expect(applied.actions.map((x) => [x.action, x.status])).toEqual(
        plain.actions.map((x) => [x.action, x.status]),
      );
      expect(await tree(a)).toEqual(await tree(b));
    },
  );

  it("refuses a destination whose state changed since the plan, writing nothing there, and applies the others", async () => {
    const v1 = await source("v1", V1, 1);
    const v2 = await source("v2", V2, 2);
    const v3 = await source("v3", V3, 3);
    const a = join(dir, "a");
    const b = join(dir, "b");
    await publish(config(v1, { archive: a, mirror: b }), T1);
    const plan = await planned(config(v2, { archive: a, mirror: b }), T2);
    expect(plan.destinations.map((e) => e.destination_id)).toEqual(["archive", "mirror"]);
    // Meanwhile another run publishes a newer source to archive only.
    await publish(config(v3, { archive: a }), T2);
    const moved = await tree(a);

    const report = await apply({ plan, config: config(v2, { archive: a, mirror: b }) });
    expect(
      report.actions.map((x) => [x.destination_id, x.action, x.status, x.error?.code]),
    ).toEqual([
      ["archive", "replace_older", "failed", "plan_stale"],
      ["mirror", "replace_older", "published", undefined],
    ]);
    expect(report.actions[0]?.error?.message).toMatch(/destination state changed since the plan/);
    expect(await tree(a)).toEqual(moved);
    expect(Object.keys(await tree(b)).sort()).toContain("d.txt");
  });

  it("refuses when a file appeared where the plan creates one, naming it", async () => {
    const v1 = await source("v1", V1, 1);
    const v2 = await source("v2", V2, 2);
    const a = join(dir, "a");
    await publish(config(v1, { archive: a }), T1);
    const plan = await planned(config(v2, { archive: a }), T2);
    const create = plan.destinations[0]?.writes.find((w) => w.path === "d.txt");
    expect(create?.overwrite).toBe(false);
    // The state is unchanged; only a file no state records appeared at the planned create.
    await writeFile(join(a, "d.txt"), "someone else's\n");
    const before = await tree(a);
    const report = await apply({ plan, config: config(v2, { archive: a }) });
    expect(report.actions.map((x) => [x.status, x.error?.code])).toEqual([
      ["failed", "plan_stale"],
    ]);
    expect(report.actions[0]?.error?.message).toMatch(/would now be fail_unmanaged .*d\.txt/);
    expect(await tree(a)).toEqual(before);
  });

  it("refuses when a stored file the plan replaces changed since, naming the path and versions", async () => {
    const v1 = await source("v1", V1, 1);
    const v2 = await source("v2", V2, 2);
    const a = join(dir, "a");
    await publish(config(v1, { archive: a }), T1);
    const plan = await planned(config(v2, { archive: a }), T2);
    const replaced = plan.destinations[0]?.writes.find((w) => w.path === "a.md");
    expect(replaced?.overwrite).toBe(true);
    // Edited by hand: the state (and so its version) is unchanged, the stored version is not.
    await writeFile(join(a, "a.md"), "edited by hand\n");
    const before = await tree(a);
    const report = await apply({ plan, config: config(v2, { archive: a }) });
    expect(report.actions.map((x) => [x.status, x.error?.code])).toEqual([
      ["failed", "plan_stale"],
    ]);
    const message = report.actions[0]?.error?.message ?? "";
    expect(message).toContain(
      `a.md: planned overwrite of version ${replaced?.if_match} with ${replaced?.sha256}, now overwrite of version `,
    );
    expect(message).toMatch(/none of plan plan was carried out there/);
    expect(await tree(a)).toEqual(before);
  });

  it("refuses when the source changed: a file's bytes or the manifest", async () => {
    const v1 = await source("v1", V1, 1);
    const v2 = await source("v2", V2, 2);
    const a = join(dir, "a");
    await publish(config(v1, { archive: a }), T1);
    const before = await tree(a);
    const plan = await planned(config(v2, { archive: a }), T2);

    await writeFile(join(v2, "d.txt"), "d tampered\n");
    const files = await apply({ plan, config: config(v2, { archive: a }) });
    expect(files.actions.map((x) => [x.status, x.error?.code])).toEqual([
      ["failed", "source_changed"],
    ]);
    expect(files.actions[0]?.error?.message).toMatch(/d\.txt/);
    expect(await tree(a)).toEqual(before);

    await source("v2", { ...V2, "d.txt": "d tampered\n" }, 2);
    const manifest = await apply({ plan, config: config(v2, { archive: a }) });
    expect(manifest.actions[0]?.error?.code).toBe("source_changed");
    expect(manifest.actions[0]?.error?.message).toMatch(/changed since the plan/);
    expect(await tree(a)).toEqual(before);
  });

  it("refuses when the destination is configured differently or no longer configured", async () => {
    const v1 = await source("v1", V1, 1);
    const a = join(dir, "a");
    const plan = await planned(config(v1, { archive: a }), T1);
    const merged = await apply({
      plan,
      config: config(v1, { archive: a }, "        reconciliation: {mode: merge}\n"),
    });
    expect(merged.actions.map((x) => [x.action, x.status, x.error?.code])).toEqual([
      ["publish_new", "failed", "config_changed"],
    ]);
    expect(merged.actions[0]?.error?.message).toMatch(
      /pipeline reports destination archive in .* changed since the plan \(destination\.reconciliation\)/,
    );
    const moved = await apply({ plan, config: config(join(dir, "elsewhere"), { archive: a }) });
    expect(moved.actions[0]?.error?.message).toMatch(/changed since the plan \(source\)/);
    const gone = await apply({ plan, config: config(v1, { other: a }) });
    expect(gone.actions[0]?.error?.code).toBe("config_changed");
    expect(gone.actions[0]?.error?.message).toMatch(/no destination archive/);
    expect(await tree(a)).toEqual({});
  });

  it("refuses a plan edited after it was made", async () => {
    const v1 = await source("v1", V1, 1);
    const a = join(dir, "a");
    const plan = await planned(config(v1, { archive: a }), T1);
    const edited = structuredClone(plan);
    const write = edited.destinations[0]?.writes[0];
    if (write === undefined) throw new Error("no write planned");
    write.overwrite = true;
    const report = await apply({ plan: edited, config: config(v1, { archive: a }) });
    expect(report.actions.map((x) => [x.status, x.error?.code])).toEqual([
      ["failed", "plan_stale"],
    ]);
    expect(report.actions[0]?.error?.message).toMatch(
      /a\.html: planned overwrite with sha256:[0-9a-f]{64}, now create with sha256:/,
    );
    expect(await tree(a)).toEqual({});
  });

  it("a fixed destination refuses once a newer bundle was added to the source", async () => {
    const root = join(dir, "bundles");
    const backend = createLocalBackend({ root });
    await writeSourceBundle(backend, "2026-06-01", V1, { created: T1 });
    const a = join(dir, "a");
    const fixed = config(root, { site: a }, "        path_mapping: {mode: fixed}\n");
    const plan = await planned(fixed, T1);
    expect(plan.destinations[0]?.source.bundle_path).toBe("2026-06-01");
    expect(plan.destinations[0]?.bundle_path).toBe("");
    await writeSourceBundle(backend, "2026-06-02", V2, { created: T2 });
    const report = await apply({ plan, config: fixed });
    expect(report.actions.map((x) => [x.status, x.error?.code])).toEqual([
      ["failed", "source_changed"],
    ]);
    expect(report.actions[0]?.error?.message).toMatch(
      /newest bundle of the source is now 2026-06-02, not the planned 2026-06-01/,
    );
    expect(await tree(a)).toEqual({});
    // Without the newer bundle, the plan applies.
    await rm(join(root, "2026-06-02"), { recursive: true });
    const applied = await apply({ plan, config: fixed });
    expect(applied.actions.map((x) => [x.action, x.status])).toEqual([
      ["publish_new", "published"],
    ]);
    expect(Object.keys(await tree(a)).sort()).toEqual([
      ".distributor.json",
      "a.html",
      "a.md",
      "b.txt",
      "docs/c.txt",
    ]);
  });

  it("a dry run of apply checks the plan and writes nothing", async () => {
    const v1 = await source("v1", V1, 1);
    const a = join(dir, "a");
    const plan = await planned(config(v1, { archive: a }), T1);
    const report = await apply({ plan, config: config(v1, { archive: a }), dryRun: true });
    expect(report.actions.map((x) => [x.action, x.status])).toEqual([["publish_new", "planned"]]);
    expect(await tree(a)).toEqual({});
  });

  it("hands out no plan when a destination could not be planned", async () => {
    const a = join(dir, "a");
    const result = await planRun({ config: config(join(dir, "missing"), { archive: a }) });
    expect(result.plan).toBeNull();
    expect(result.report.pipeline_errors).toHaveLength(1);
  });

  it("reads only its own format, naming the file", async () => {
    const v1 = await source("v1", V1, 1);
    const plan = await planned(config(v1, { archive: join(dir, "a") }), T1);
    const text = encodePlan(plan);
    expect(parsePlan(text, "p.json")).toEqual(plan);
    expect(() =>
      parsePlan(
        text.replace(`"format_version": ${PLAN_FORMAT_VERSION}`, '"format_version": 2'),
        "p.json",
      ),
    ).toThrow(/plan file p\.json has format_version 2; this distributor reads format_version 1/);
    expect(() => parsePlan("{}", "p.json")).toThrow(/p\.json is not a distributor plan/);
    expect(() => parsePlan("[", "p.json")).toThrow(/p\.json is not JSON/);
    expect(() => parsePlan(text.replace('"force": false', '"force": "no"'), "p.json")).toThrow(
      /p\.json is not a valid plan: force/,
    );
    await expect(
      apply({
        plan,
        config: config(v1, { archive: join(dir, "a") }),
        distributorVersion: "9.9.9",
        planName: "p.json",
      }),
    ).rejects.toThrow(/plan file p\.json was made by distributor \(unknown\), and this is 9\.9\.9/);
  });

  it("saves no forced plan, and applies none", async () => {
    const v1 = await source("v1", V1, 1);
    const a = join(dir, "a");
    await publish(config(v1, { archive: a }), T1);
    await writeFile(join(a, "stray.txt"), "not ours\n");
    await expect(planRun({ config: config(v1, { archive: a }), force: true })).rejects.toThrow(
      expect.objectContaining({ code: "plan_force_unsupported" }),
    );
    // A plan file that says force: the clear would delete whatever is there when applied.
    const v2 = await source("v2", V2, 2);
    const plan = await planned(config(v2, { archive: a }), T2);
    const before = await tree(a);
    await expect(
      apply({
        plan: { ...plan, force: true },
        config: config(v2, { archive: a }),
        planName: "p.json",
      }),
    ).rejects.toThrow(/plan file p\.json is a forced plan/);
    expect(await tree(a)).toEqual(before);
  });

  it("refuses a plan older than the maximum age, naming the file and its age", async () => {
    const v1 = await source("v1", V1, 1);
    const a = join(dir, "a");
    const plan = await planned(config(v1, { archive: a }), T1);
    const later = new Date(T1.getTime() + 25 * 60 * 60 * 1000);
    const late = applyPlan({
      plan,
      config: config(v1, { archive: a }),
      planName: "p.json",
      now: () => later,
    });
    await expect(late).rejects.toThrow(
      expect.objectContaining({
        code: "plan_expired",
        message: expect.stringMatching(
          /^plan file p\.json was made 25h ago \(planned_at 2026-06-04T10:00:00\.000Z\), more than the maximum age 24h/,
        ),
      }),
    );
    expect(await tree(a)).toEqual({});
    // Allowed longer, the same plan applies, recording the plan's time.
    const report = await applyPlan({
      plan,
      config: config(v1, { archive: a }),
      now: () => later,
      maxAgeMs: 48 * 60 * 60 * 1000,
    });
    expect(report.actions.map((x) => [x.action, x.status])).toEqual([["publish_new", "published"]]);
    const state = JSON.parse((await tree(a))[".distributor.json"] ?? "");
    expect(state).toEqual(plan.destinations[0]?.next_state);
  });

  it("saves no plan where a write precedes another owner of the same shared-root state", async () => {
    const v1 = await source("v1", V1, 1);
    const root = join(dir, "shared");
    const owner = (id: string, publish: string) =>
      `  - id: ${id}\n    source: {backend: local, path: ${v1}}\n    destinations:\n      - id: shared\n        backend: local\n        path: ${root}\n        state: {mode: shared_root}\n        publish: ${publish}\n        transform: {markdown_to_html: {enabled: true}}\n`;
    const shared = parseConfig(
      `pipelines:\n${owner("copies", "{source: true, html: false}")}${owner("html", "{source: false, html: true}")}`,
      { sourceName: join(dir, "distributor.yml") },
    );
    await expect(planRun({ config: shared, now: () => T1 })).rejects.toThrow(
      expect.objectContaining({
        code: "plan_shared_state",
        message: expect.stringMatching(
          /^pipeline copies destination shared and pipeline html destination shared share the state file of bundle path \., .*plan one pipeline at a time \(--pipeline copies, apply, then --pipeline html\)$/,
        ),
      }),
    );
    expect(await tree(root)).toEqual({});
    // One pipeline at a time, each plan applies in full.
    for (const id of ["copies", "html"]) {
      const { plan } = await planRun({ config: shared, pipelineIds: [id], now: () => T1 });
      if (plan === null) throw new Error(`no plan for ${id}`);
      const report = await apply({ plan, config: shared });
      expect(report.actions.map((x) => [x.pipeline_id, x.status])).toEqual([[id, "published"]]);
    }
    expect(Object.keys(await tree(root)).sort()).toEqual([
      ".distributor.json",
      "a.html",
      "a.md",
      "b.txt",
      "docs/c.txt",
    ]);
    // Nothing left to write: both skips stand in one plan, and apply.
    const { plan } = await planRun({ config: shared, now: () => T2 });
    expect(plan?.destinations.map((e) => e.action)).toEqual(["skip_same", "skip_same"]);
  });
});
