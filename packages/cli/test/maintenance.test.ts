import { readFile, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { envelopeOf, resultOf, runCli, useTempDir, writeFiles } from "./helpers.js";

const tmp = useTempDir();

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

/**
 * Publishes a two-file bundle through `run`, so the destination holds real schema 2 state, and
 * returns the paths plus a selector for the maintenance commands.
 */
async function published(retention = "") {
  const source = join(tmp(), "src");
  const dest = join(tmp(), "dest");
  await writeFiles(source, { "report.md": "# Report\n", "summary.txt": "Summary\n" });
  const made = await runCli([
    "manifest",
    "create",
    "--id",
    "reports.daily",
    "--created",
    "2026-06-01T00:00:00Z",
    source,
  ]);
  expect(made.code, made.stderr).toBe(0);
  const configPath = join(tmp(), "distributor.yml");
  await writeFile(
    configPath,
    `pipelines:\n  - id: reports\n    source: {backend: local, path: ${source}}\n    destinations:\n      - id: archive\n        backend: local\n        path: ${dest}\n${retention}`,
  );
  const run = await runCli(["run", "--config", configPath]);
  expect(run.code, run.stderr).toBe(0);
  const selector = ["--config", configPath, "--pipeline", "reports", "--destination", "archive"];
  return { dest, selector, statePath: join(dest, ".distributor.json") };
}

describe("distributor reconcile-state", () => {
  it("TestExecuteReconcileStateDryRunReportsWithoutWriting", async () => {
    const { dest, selector, statePath } = await published();
    await rm(join(dest, "summary.txt"));
    await writeFile(join(dest, "extra.txt"), "hand-placed\n");
    const before = await readFile(statePath, "utf8");
    const result = await runCli(["reconcile-state", ...selector, "--dry-run"]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(
      /^Reconcile state: pipeline=reports destination=archive backend=local root=\S+ status=would_change checked=2 missing=1 unmanaged=1 dry_run=true\n$/,
    );
    expect(result.stderr).toBe("");
    expect(await readFile(statePath, "utf8")).toBe(before);
  });

  it("TestExecuteReconcileStateAppliesByDefault and TestExecuteReconcileStateJSONReport", async () => {
    const { dest, selector, statePath } = await published();
    await rm(join(dest, "summary.txt"));
    await writeFile(join(dest, "extra.txt"), "hand-placed\n");
    const result = await runCli(["reconcile-state", ...selector, "--format", "json"]);
    expect(result.code, result.stderr).toBe(0);
    const envelope = envelopeOf(result);
    expect(envelope.command).toBe("reconcile-state");
    expect(envelope.ok).toBe(true);
    const report = resultOf(result);
    expect(report.changed).toBe(true);
    expect(report.dry_run).toBe(false);
    expect(report.missing_managed_outputs).toEqual([
      { path: "summary.txt", storage_status: "missing" },
    ]);
    expect(report.unmanaged_entries).toEqual([{ path: "extra.txt", type: "file", size: 12 }]);
    const state = JSON.parse(await readFile(statePath, "utf8"));
    expect(state.outputs.map((o: { path: string }) => o.path)).toEqual(["report.md"]);
    expect(await readFile(join(dest, "extra.txt"), "utf8")).toBe("hand-placed\n");

    const again = await runCli(["reconcile-state", ...selector]);
    expect(again.stdout).toContain("status=unchanged checked=1 missing=0 unmanaged=1");
  });

  it("fails on another owner's state and leaves it unchanged", async () => {
    const { selector, statePath } = await published();
    const before = await readFile(statePath, "utf8");
    await writeFile(statePath, before.replace('"pipeline_id":"reports"', '"pipeline_id":"other"'));
    const changed = await readFile(statePath, "utf8");
    const result = await runCli(["reconcile-state", ...selector]);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe("");
    expect(result.stderr).toContain("state owner is other/archive, not reports/archive");
    expect(await readFile(statePath, "utf8")).toBe(changed);
  });
});

describe("distributor prune", () => {
  // Merged: the files of the first bundle stay beside the second's, and only they can be pruned
  // (the publication in force, today.txt, never is).
  const keepNone =
    "        reconciliation: {mode: merge}\n        retention: {prune: {enabled: true, keep_latest: 0, older_than: 1h}}\n";

  /** `published`, then a newer bundle of other files: report.md and summary.txt are leftovers. */
  async function withLeftovers(retention: string) {
    const first = await published(retention);
    const source = join(tmp(), "src");
    await rm(join(source, "report.md"));
    await rm(join(source, "summary.txt"));
    await writeFiles(source, { "today.txt": "Today\n" });
    const made = await runCli([
      "manifest",
      "create",
      "--id",
      "reports.daily",
      "--created",
      "2026-06-02T00:00:00Z",
      "--force",
      source,
    ]);
    expect(made.code, made.stderr).toBe(0);
    const run = await runCli(["run", "--config", first.selector[1] as string]);
    expect(run.code, run.stderr).toBe(0);
    return first;
  }

  it("TestExecutePruneDryRunReportsWithoutWriting and TestExecutePruneJSONReport", async () => {
    const { selector, statePath } = await withLeftovers(keepNone);
    const before = await readFile(statePath, "utf8");
    const text = await runCli(["prune", ...selector, "--dry-run"]);
    expect(text.code, text.stderr).toBe(0);
    // Outputs were written moments ago, so nothing is older than an hour.
    expect(text.stdout).toContain(
      "status=unchanged checked=2 planned=0 deleted=0 preserved=2 dry_run=true",
    );
    const state = JSON.parse(before);
    for (const output of state.outputs) output.updated_at = "2026-01-01T00:00:00Z";
    // The live today.txt is as old, and still no candidate.
    await writeFile(statePath, `${JSON.stringify(state, null, 2)}\n`);
    const aged = await readFile(statePath, "utf8");

    const dry = await runCli(["prune", ...selector, "--dry-run"]);
    expect(dry.stdout).toMatch(
      /status=would_change checked=2 planned=2 deleted=0 preserved=0 dry_run=true/,
    );
    const json = await runCli(["prune", ...selector, "--dry-run", "--format", "json"]);
    expect(envelopeOf(json)).toMatchObject({ command: "prune", ok: true });
    const report = resultOf(json);
    expect(report.would_change).toBe(true);
    expect((report.planned_outputs as unknown[]).length).toBe(2);
    expect(json.stderr).toBe("");
    expect(await readFile(statePath, "utf8")).toBe(aged);
  });

  it("says status=disabled when the destination's policy is disabled (the default)", async () => {
    const { selector, statePath } = await published();
    const before = await readFile(statePath, "utf8");

    const dry = await runCli(["prune", ...selector, "--dry-run"]);
    const applied = await runCli(["prune", ...selector, "--apply"]);
    const json = await runCli(["prune", ...selector, "--apply", "--format", "json"]);

    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toMatch(
      /^Prune: pipeline=reports destination=archive backend=local root=\S+ status=disabled checked=0 planned=0 deleted=0 preserved=0 dry_run=true\n$/,
    );
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stdout).toContain(" status=disabled checked=0 planned=0 deleted=0 ");
    expect(resultOf(json)).toMatchObject({ enabled: false, checked_count: 0, planned_outputs: [] });
    expect(await readFile(statePath, "utf8")).toBe(before);
  });

  it("TestExecutePruneApplyDeletesManagedOutputs, then is idempotent", async () => {
    const { dest, selector, statePath } = await withLeftovers(keepNone);
    await writeFile(join(dest, "unmanaged.txt"), "keep me\n");
    const state = JSON.parse(await readFile(statePath, "utf8"));
    for (const output of state.outputs) output.updated_at = "2026-01-01T00:00:00Z";
    await writeFile(statePath, `${JSON.stringify(state, null, 2)}\n`);

    const applied = await runCli(["prune", ...selector, "--apply"]);
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stdout).toContain(
      "status=changed checked=2 planned=2 deleted=2 preserved=0 dry_run=false",
    );
    expect(await exists(join(dest, "report.md"))).toBe(false);
    expect(await exists(join(dest, "summary.txt"))).toBe(false);
    expect(await readFile(join(dest, "unmanaged.txt"), "utf8")).toBe("keep me\n");
    // The publication in force stays, recorded.
    expect(await readFile(join(dest, "today.txt"), "utf8")).toBe("Today\n");
    expect(
      JSON.parse(await readFile(statePath, "utf8")).outputs.map((o: { path: string }) => o.path),
    ).toEqual(["today.txt"]);

    const again = await runCli(["prune", ...selector, "--apply"]);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain("status=unchanged checked=0 planned=0 deleted=0");
  });
});
