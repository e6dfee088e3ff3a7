import { execFile, spawnSync } from "node:child_process";
import { cp, mkdir, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import {
  envelopeOf,
  resultOf,
  runCli,
  sha256Of,
  snapshotTree,
  useTempDir,
  writeBundle,
} from "./helpers.js";

const tmp = useTempDir();

/** The first audited bundle of an audit report. */
function firstBundle(report: Record<string, unknown>): Record<string, unknown> {
  const destinations = report.destinations as Array<{ bundles: Array<Record<string, unknown>> }>;
  const bundle = destinations[0]?.bundles[0];
  if (bundle === undefined) throw new Error("no audited bundle");
  return bundle;
}

const FILES = {
  "report.md": "# Report\nSunny.\n",
  "data/summary.txt": "Summary of the day\n",
  "data/table.csv": "a,b\n1,2\n",
};

/** A published destination: source bundle, config, and the three ways an output drifts. */
async function published(extra = "") {
  const source = join(tmp(), "src");
  const dest = join(tmp(), "dest");
  await writeBundle(source, "reports.daily", "2026-06-01T00:00:00Z", FILES);
  const config = join(tmp(), "distributor.yml");
  await writeFile(
    config,
    `pipelines:\n  - id: reports\n    source: {backend: local, path: ${source}}\n    destinations:\n      - id: archive\n        backend: local\n        path: ${dest}\n${extra}`,
  );
  const run = await runCli(["run", "--config", config]);
  expect(run.code, run.stderr).toBe(0);
  return { source, dest, config };
}

/** Deletes one output, truncates another and replaces a third with other bytes of equal size. */
async function drift(dest: string) {
  await rm(join(dest, "report.md"));
  await writeFile(join(dest, "data/summary.txt"), "Summ");
  await writeFile(join(dest, "data/table.csv"), "a,b\n9,9\n");
}

describe("distributor audit", () => {
  it("reports a clean destination and exits 0", async () => {
    const { config } = await published();
    const result = await runCli(["audit", "--config", config]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toBe(
      "Audit: pipeline=reports destination=archive bundle=. status=ok checked=3 ok=3 missing=0 changed=0 unmanaged=0 incomplete=0\n",
    );
    expect(result.stderr).toBe("");
  });

  it("finds a deleted, a truncated and a replaced output, and unmanaged entries, exiting 1", async () => {
    const { dest, config } = await published();
    await drift(dest);
    await writeFile(join(dest, "notes.txt"), "hand-placed\n");
    const before = await snapshotTree(dest);
    const text = await runCli(["audit", "--config", config]);
    expect(text.code).toBe(1);
    expect(text.stdout.split("\n")).toEqual([
      "Audit: pipeline=reports destination=archive bundle=. status=drift checked=3 ok=0 missing=1 changed=2 unmanaged=1 incomplete=0",
      "Drift: pipeline=reports destination=archive bundle=. path=data/summary.txt status=changed",
      "Drift: pipeline=reports destination=archive bundle=. path=data/table.csv status=changed",
      "Drift: pipeline=reports destination=archive bundle=. path=report.md status=missing",
      "Unmanaged: pipeline=reports destination=archive bundle=. path=notes.txt type=file",
      "",
    ]);
    expect(text.stderr).toContain("distributor: audit found 1 missing and 2 changed");

    const json = await runCli(["audit", "--config", config, "--format", "json"]);
    expect(json.code).toBe(1);
    const envelope = envelopeOf(json);
    expect(envelope.ok).toBe(false);
    expect(envelope.error?.code).toBe("drift");
    const report = resultOf(json);
    expect(report).toMatchObject({
      checked_count: 3,
      ok_count: 0,
      missing_count: 1,
      changed_count: 2,
      unmanaged_count: 1,
      invalid_states: 0,
      drift: true,
      failed: false,
    });
    const bundle = firstBundle(report);
    expect(bundle.outputs).toEqual([
      {
        path: "data/summary.txt",
        status: "changed",
        sha256: sha256Of(FILES["data/summary.txt"]),
        size: 19,
        found_sha256: sha256Of("Summ"),
        found_size: 4,
        found_type: "file",
      },
      {
        path: "data/table.csv",
        status: "changed",
        sha256: sha256Of(FILES["data/table.csv"]),
        size: 8,
        found_sha256: sha256Of("a,b\n9,9\n"),
        found_size: 8,
        found_type: "file",
      },
      {
        path: "report.md",
        status: "missing",
        sha256: sha256Of(FILES["report.md"]),
        size: 16,
        found_sha256: null,
        found_size: null,
        found_type: null,
      },
    ]);
    expect(bundle.unmanaged_entries).toEqual([{ path: "notes.txt", type: "file", size: 12 }]);
    // Audit reads only: no lease, no rewrite.
    expect(await snapshotTree(dest)).toEqual(before);
  });

  it("reports an invalid state as drift", async () => {
    const { dest, config } = await published();
    await writeFile(join(dest, ".distributor.json"), "{not json");
    const result = await runCli(["audit", "--config", config, "--format", "json"]);
    expect(result.code).toBe(1);
    const report = resultOf(result);
    expect(report.invalid_states).toBe(1);
  });

  it("selects pipelines and destinations", async () => {
    const { config } = await published();
    const unknown = await runCli(["audit", "--config", config, "--destination", "nope"]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("destination nope not found");
    const none = await runCli(["audit", "--config", config, "--pipeline", "nope"]);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('pipeline "nope" not found');
  });
});

describe("distributor run --repair", () => {
  it("restores a deleted, a truncated and a replaced output; then audit is clean", async () => {
    const { dest, config } = await published();
    await drift(dest);
    await writeFile(join(dest, "notes.txt"), "hand-placed\n");

    // A plain run (even forced) skips: the state matches the source.
    const plain = await runCli(["run", "--config", config, "--force"]);
    expect(plain.code, plain.stderr).toBe(0);
    expect(plain.stdout).toContain("action=skip_same status=skipped");

    const before = await snapshotTree(dest);
    const dry = await runCli([
      "run",
      "--config",
      config,
      "--repair",
      "--dry-run",
      "--format",
      "json",
    ]);
    expect(dry.code, dry.stderr).toBe(0);
    const actions = resultOf(dry).actions as Array<Record<string, unknown>>;
    const planned = actions[0] ?? {};
    expect(planned.action).toBe("repair");
    expect(planned.status).toBe("planned");
    expect((planned.outputs as Array<{ path: string }>).map((o) => o.path)).toEqual([
      "data/summary.txt",
      "data/table.csv",
      "report.md",
    ]);
    expect(planned.reason).toContain(
      "restores 3 managed output(s): data/summary.txt (changed), data/table.csv (changed), report.md (missing)",
    );
    expect(await snapshotTree(dest)).toEqual(before);

    const repaired = await runCli(["run", "--config", config, "--repair"]);
    expect(repaired.code, repaired.stderr).toBe(0);
    expect(repaired.stdout).toBe(
      "pipeline=reports destination=archive bundle=. source=reports.daily action=repair status=published outputs=3 primary_url=-\n",
    );
    for (const [path, text] of Object.entries(FILES)) {
      expect(await readFile(join(dest, path), "utf8")).toBe(text);
    }
    expect(await readFile(join(dest, "notes.txt"), "utf8")).toBe("hand-placed\n");
    const audited = await runCli(["audit", "--config", config]);
    expect(audited.code, audited.stdout).toBe(0);
    expect(audited.stdout).toContain("status=ok checked=3 ok=3 missing=0 changed=0 unmanaged=1");

    // Nothing left to restore: a repair run is a skip again.
    const again = await runCli(["run", "--config", config, "--repair"]);
    expect(again.stdout).toContain("action=skip_same status=skipped");
  });

  it("refuses to restore where a directory now stands, touching nothing", async () => {
    const { dest, config } = await published();
    await rm(join(dest, "report.md"));
    await writeFile(join(dest, "data/summary.txt"), "Summ");
    await mkdir(join(dest, "report.md"));
    const before = await snapshotTree(dest);
    const result = await runCli(["run", "--config", config, "--repair"]);
    expect(result.code).toBe(1);
    expect(result.stdout).toContain("action=fail_unmanaged status=failed");
    expect(result.stderr).toContain(
      "report.md (directory) stands where the state records a managed output",
    );
    expect(await snapshotTree(dest)).toEqual(before);
  });
});

/** The tree without the state file: what adoption and rebuilding must leave byte-identical. */
async function outputsOnly(dest: string) {
  return (await snapshotTree(dest)).filter((line) => !line.includes(".distributor.json"));
}

/** A source bundle and a destination another tool filled with a copy of it (no state). */
async function copiedByAnotherTool() {
  const source = join(tmp(), "src");
  const dest = join(tmp(), "dest");
  await writeBundle(source, "reports.daily", "2026-06-01T00:00:00Z", FILES);
  // What `rsync -a src/ dest/` (or `aws s3 sync`) leaves: the files, without distributor's state.
  await cp(source, dest, { recursive: true, preserveTimestamps: true });
  await rm(join(dest, "manifest.json"));
  const config = join(tmp(), "distributor.yml");
  await writeFile(
    config,
    `pipelines:\n  - id: reports\n    source: {backend: local, path: ${source}}\n    destinations:\n      - id: archive\n        backend: local\n        path: ${dest}\n`,
  );
  const selector = ["--config", config, "--pipeline", "reports", "--destination", "archive"];
  return { source, dest, config, selector };
}

describe("distributor reconcile-state --adopt", () => {
  it("records every output of a copied bundle without writing one; run then skips", async () => {
    const { dest, config, selector } = await copiedByAnotherTool();
    const refused = await runCli(["run", "--config", config]);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toContain("action=fail_unmanaged");

    const before = await outputsOnly(dest);
    const dry = await runCli(["reconcile-state", ...selector, "--adopt", "--dry-run"]);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toMatch(
      /^Reconcile state: pipeline=reports destination=archive backend=local root=\S+ mode=adopt bundle=\. status=would_change adopted=3 managed=0 unmatched=0 unmanaged=0 dry_run=true\n$/,
    );
    expect(await snapshotTree(dest)).toEqual(before);

    const adopted = await runCli(["reconcile-state", ...selector, "--adopt", "--format", "json"]);
    expect(adopted.code, adopted.stderr).toBe(0);
    const report = resultOf(adopted);
    expect(report.changed).toBe(true);
    const bundles = report.bundles as Array<Record<string, unknown>>;
    expect(bundles[0]?.adopted_outputs).toEqual(
      Object.entries(FILES)
        .map(([path, text]) => ({ path, sha256: sha256Of(text), size: Buffer.byteLength(text) }))
        .sort((a, b) => (a.path < b.path ? -1 : 1)),
    );
    // Only the state was written: every output keeps its bytes.
    expect(await outputsOnly(dest)).toEqual(before);
    const state = JSON.parse(await readFile(join(dest, ".distributor.json"), "utf8"));
    expect(state.outputs.map((o: { path: string }) => o.path).sort()).toEqual(
      Object.keys(FILES).sort(),
    );

    const run = await runCli(["run", "--config", config]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain("action=skip_same status=skipped");
    const audited = await runCli(["audit", "--config", config]);
    expect(audited.code, audited.stdout).toBe(0);
    expect(audited.stdout).toContain("status=ok checked=3 ok=3 missing=0 changed=0 unmanaged=0");
  });

  it("leaves other bytes unmanaged and reports them; a run completes once they are moved", async () => {
    const { dest, config, selector } = await copiedByAnotherTool();
    await writeFile(join(dest, "data/table.csv"), "other,bytes\n");
    await rm(join(dest, "report.md"));
    await writeFile(join(dest, "notes.txt"), "mine\n");
    const adopted = await runCli(["reconcile-state", ...selector, "--adopt", "--format", "json"]);
    expect(adopted.code, adopted.stderr).toBe(0);
    const [bundle] = resultOf(adopted).bundles as Array<Record<string, unknown>>;
    expect(bundle).toMatchObject({
      adopted_outputs: [{ path: "data/summary.txt" }],
      unmatched_outputs: [
        { path: "data/table.csv", reason: "different" },
        { path: "report.md", reason: "missing" },
      ],
      unmanaged_entries: [
        { path: "data/table.csv", type: "file", size: 12 },
        { path: "notes.txt", type: "file", size: 5 },
      ],
    });
    // The publication lacks report.md and data/table.csv; other bytes stand at the second, and
    // unmanaged bytes are never overwritten: the run refuses, writing nothing, and says where.
    const refused = await runCli(["run", "--config", config, "--repair"]);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toContain("action=fail_unmanaged");
    expect(refused.stderr).toContain("data/table.csv exists but is not managed");
    expect(await readFile(join(dest, "data/table.csv"), "utf8")).toBe("other,bytes\n");
    await expect(readFile(join(dest, "report.md"), "utf8")).rejects.toThrow();
    // Once the operator moves them away, a plain run completes the publication.
    await rm(join(dest, "data/table.csv"));
    const completed = await runCli(["run", "--config", config]);
    expect(completed.code, completed.stderr).toBe(0);
    expect(completed.stdout).toContain("action=complete status=published");
    expect(await readFile(join(dest, "report.md"), "utf8")).toBe(FILES["report.md"]);
    expect(await readFile(join(dest, "data/table.csv"), "utf8")).toBe(FILES["data/table.csv"]);
    expect(await readFile(join(dest, "notes.txt"), "utf8")).toBe("mine\n");
  });

  it("refuses an invalid state, pointing at --rebuild", async () => {
    const { dest, selector } = await published().then((p) => ({
      ...p,
      selector: ["--config", p.config, "--pipeline", "reports", "--destination", "archive"],
    }));
    await writeFile(join(dest, ".distributor.json"), "{ corrupted");
    const result = await runCli(["reconcile-state", ...selector, "--adopt"]);
    expect(result.code).toBe(1);
    expect(result.stdout).toContain("status=refused");
    expect(result.stderr).toContain("use --rebuild to replace it");
    expect(await readFile(join(dest, ".distributor.json"), "utf8")).toBe("{ corrupted");
  });

  it("rejects --adopt with --rebuild or --all-owners as usage errors", async () => {
    const both = await runCli([
      "reconcile-state",
      "--config",
      "x",
      "--pipeline",
      "p",
      "--destination",
      "d",
      "--adopt",
      "--rebuild",
    ]);
    expect(both.code).toBe(2);
    expect(both.stderr).toBe(
      "distributor: reconcile-state accepts --adopt or --rebuild, not both\n",
    );
    const owners = await runCli([
      "reconcile-state",
      "--config",
      "x",
      "--pipeline",
      "p",
      "--destination",
      "d",
      "--rebuild",
      "--all-owners",
    ]);
    expect(owners.code).toBe(2);
  });
});

describe("distributor reconcile-state --rebuild", () => {
  it("rebuilds a corrupted state from the source and the bytes present, deleting nothing", async () => {
    const { dest, config } = await published();
    const selector = ["--config", config, "--pipeline", "reports", "--destination", "archive"];
    await writeFile(join(dest, ".distributor.json"), '{"schema_version": 2, "trunc');
    await writeFile(join(dest, "data/table.csv"), "edited by hand\n");
    await writeFile(join(dest, "notes.txt"), "mine\n");
    const failing = await runCli(["run", "--config", config]);
    expect(failing.code).toBe(1);
    expect(failing.stdout).toContain("action=fail_conflict");

    const before = await snapshotTree(dest);
    const dry = await runCli(["reconcile-state", ...selector, "--rebuild", "--dry-run"]);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toContain(
      "mode=rebuild bundle=. status=would_change adopted=2 managed=0 unmatched=1 unmanaged=2 dry_run=true",
    );
    expect(await snapshotTree(dest)).toEqual(before);

    const rebuilt = await runCli(["reconcile-state", ...selector, "--rebuild"]);
    expect(rebuilt.code, rebuilt.stderr).toBe(0);
    expect(rebuilt.stdout).toContain("status=changed adopted=2");
    expect(await outputsOnly(dest)).toEqual(before.filter((l) => !l.includes(".distributor.json")));
    const state = JSON.parse(await readFile(join(dest, ".distributor.json"), "utf8"));
    expect(state.outputs.map((o: { path: string }) => o.path)).toEqual([
      "data/summary.txt",
      "report.md",
    ]);
    // A valid state is not rebuilt again.
    const again = await runCli(["reconcile-state", ...selector, "--rebuild"]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("holds valid state, so there is nothing to rebuild");
    // Records and bytes agree, but the publication lacks data/table.csv (other bytes stand
    // there): audit says so.
    const audited = await runCli(["audit", "--config", config]);
    expect(audited.code, audited.stdout).toBe(1);
    expect(audited.stdout).toContain(
      "Incomplete: pipeline=reports destination=archive bundle=. path=data/table.csv status=not_recorded",
    );
  });
});

/** Runs a tool the way an operator would, asynchronously (see FACTS: no spawnSync). */
const execTool = promisify(execFile);

/**
 * `rsync`, as an operator has it. Under CI a missing one fails the test (.ci/run installs it);
 * elsewhere the test is skipped.
 */
const rsyncSkipped =
  spawnSync("rsync", ["--version"]).error !== undefined &&
  ["", "0", "false", undefined].includes(process.env.CI);

/** Inode, modification time and bytes of every file below `root`: what a write would change. */
async function fileIdentities(root: string): Promise<Record<string, string>> {
  const found: Record<string, string> = {};
  for (const entry of await readdir(root, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || entry.name === ".distributor.json") continue;
    const path = join(entry.parentPath, entry.name);
    const info = await stat(path);
    found[path.slice(root.length + 1)] =
      `${info.ino} ${info.mtimeMs} ${sha256Of(await readFile(path))}`;
  }
  return found;
}

describe("adoption after rsync -a", () => {
  it.skipIf(rsyncSkipped)(
    "records every output of a bundle rsync copied, writing none of them",
    async () => {
      const source = join(tmp(), "src");
      const dest = join(tmp(), "dest");
      await writeBundle(source, "reports.daily", "2026-06-01T00:00:00Z", FILES);
      await mkdir(dest);
      await execTool("rsync", ["-a", "--exclude", "/manifest.json", `${source}/`, `${dest}/`]);
      const config = join(tmp(), "distributor.yml");
      await writeFile(
        config,
        `pipelines:\n  - id: reports\n    source: {backend: local, path: ${source}}\n    destinations:\n      - id: archive\n        backend: local\n        path: ${dest}\n`,
      );
      const before = await fileIdentities(dest);
      expect(Object.keys(before).sort()).toEqual(Object.keys(FILES).sort());

      const adopted = await runCli([
        ...["reconcile-state", "--config", config, "--pipeline", "reports"],
        ...["--destination", "archive", "--adopt", "--format", "json"],
      ]);
      expect(adopted.code, adopted.stderr).toBe(0);
      const [bundle] = resultOf(adopted).bundles as Array<{ adopted_outputs: unknown[] }>;
      expect(bundle?.adopted_outputs).toHaveLength(3);
      // Same inodes, times and bytes: only the state was written.
      expect(await fileIdentities(dest)).toEqual(before);
      const run = await runCli(["run", "--config", config]);
      expect(run.stdout).toContain("action=skip_same status=skipped");
      const audited = await runCli(["audit", "--config", config]);
      expect(audited.code, audited.stdout).toBe(0);
    },
  );
});

describe("distributor prune across bundle paths", () => {
  it("prunes an archive of 30 bundle paths to the newest 10", async () => {
    const source = join(tmp(), "src");
    const dest = join(tmp(), "archive");
    for (let day = 1; day <= 30; day++) {
      const dd = String(day).padStart(2, "0");
      await writeBundle(join(source, `2026-06-${dd}`), "reports.daily", `2026-06-${dd}T06:00:00Z`, {
        "report.md": `# Day ${day}\n`,
        "data/summary.txt": `summary ${day}\n`,
      });
    }
    const config = join(tmp(), "distributor.yml");
    await writeFile(
      config,
      `pipelines:\n  - id: reports\n    source: {backend: local, path: ${source}}\n    destinations:\n      - id: archive\n        backend: local\n        path: ${dest}\n        path_mapping: {mode: preserve_relative}\n        retention: {prune: {enabled: true, keep_latest: 10}}\n`,
    );
    const published = await runCli(["run", "--config", config]);
    expect(published.code, published.stderr).toBe(0);
    const selector = ["--config", config, "--pipeline", "reports", "--destination", "archive"];
    const days = (from: number, to: number) =>
      Array.from(
        { length: to - from + 1 },
        (_, i) => `2026-06-${String(from + i).padStart(2, "0")}`,
      );

    const before = await snapshotTree(dest);
    const dry = await runCli(["prune", ...selector, "--dry-run"]);
    expect(dry.code, dry.stderr).toBe(0);
    const lines = dry.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(
      /^Prune: pipeline=reports destination=archive backend=local root=\S+ status=would_change unit=bundles checked=30 planned=20 deleted=0 preserved=10 planned_outputs=40 deleted_outputs=0 dry_run=true$/,
    );
    expect(lines.slice(1)).toHaveLength(20);
    expect(lines[1]).toMatch(
      /^Prune bundle: pipeline=reports destination=archive bundle=2026-06-01 created=2026-06-01T06:00:00Z published_at=\S+Z outputs=2 removes_state=true status=planned$/,
    );
    // The source still holds every planned bundle: each would come back at the next run.
    const warned = dry.stderr
      .split("\n")
      .filter((line) => line.startsWith("distributor: warning:"));
    expect(warned).toHaveLength(20);
    expect(warned[0]).toBe(
      "distributor: warning: bundle 2026-06-01 is planned for pruning but its source still holds it: the next run publishes it again (remove it from the source too)",
    );
    expect(await snapshotTree(dest)).toEqual(before);

    const applied = await runCli(["prune", ...selector, "--apply", "--format", "json"]);
    expect(applied.code, applied.stderr).toBe(0);
    const report = resultOf(applied);
    expect(report).toMatchObject({ unit: "bundles", state_changed: true, dry_run: false });
    expect((report.warnings as Array<{ code: string }>).map((w) => w.code)).toEqual(
      Array(20).fill("bundle_in_source"),
    );
    const names = (list: unknown) =>
      (list as Array<{ bundle_path: string }>).map((b) => b.bundle_path);
    expect(names(report.deleted_bundles)).toEqual(days(1, 20));
    expect(names(report.preserved_bundles)).toEqual(days(21, 30).reverse());
    expect((await readdir(dest)).sort()).toEqual(days(21, 30));

    const audited = await runCli(["audit", "--config", config]);
    expect(audited.code, audited.stdout).toBe(0);
    expect(audited.stdout.trimEnd().split("\n")).toHaveLength(10);
  });
});
