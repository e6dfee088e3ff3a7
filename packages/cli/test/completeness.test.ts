import { readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  actionOf,
  type CompletenessHarness,
  type DestinationKeys,
  expectExactly,
  htmlTurnedOnAndOff,
  rollbackAfterInterruptedReplacement,
  rollbackBundles,
  type StoredState,
} from "../src/testing/index.js";
import {
  digestsBelow,
  digestsOf,
  envelopeOf,
  resultOf,
  runCli,
  sha256Of,
  singlePipelineConfig,
  spawnCli,
  useTempDir,
  writeBundle,
} from "./helpers.js";

// What a success report promises (docs/operations.md): after an exit 0 the destination holds the
// whole publication of the source its state records, under the configuration in force. Real CLI
// processes on the local backend: an interrupted replacement rolled back to the older source, the
// HTML output turned on and off, a record removed from the state, and prune beside the
// publication in force.

const tmp = useTempDir();

/** The local destination `tmp()/dest` of pipeline `reports`. */
function localHarness(): CompletenessHarness {
  const dest = () => join(tmp(), "dest");
  const configPath = () => join(tmp(), "distributor.yml");
  const lines = (keys: DestinationKeys) =>
    (keys.fixed ? "        path_mapping: {mode: fixed}\n" : "") +
    (keys.html
      ? "        publish: {source: true, html: true}\n        transform: {markdown_to_html: {enabled: true}}\n"
      : "");
  return {
    destinationId: "archive",
    workDir: tmp,
    configure: async (source, keys) => {
      await writeFile(configPath(), singlePipelineConfig(source, dest(), lines(keys)));
      return configPath();
    },
    run: (args) => runCli(args),
    spawn: (args) => spawnCli(args),
    stored: () => digestsBelow(dest()),
    storedAt: (paths) => digestsOf(dest(), paths),
    fingerprint: sha256Of,
    state: async () => JSON.parse(await readFile(join(dest(), ".distributor.json"), "utf8")),
  };
}

interface State extends StoredState {
  outputs: Array<StoredState["outputs"][number] & { updated_at: string }>;
}

async function stateOf(root: string): Promise<State> {
  return JSON.parse(await readFile(join(root, ".distributor.json"), "utf8"));
}

describe("rollback after an interrupted replacement", () => {
  // 5 000 small files: the replacement takes seconds, long enough to stop it part-way.
  const bundles = rollbackBundles(5_000);
  for (const signal of ["SIGKILL", "SIGINT"] as const) {
    it(`${signal} part-way through B, then a plain run of A completes A exactly; B again replaces it`, async () => {
      await rollbackAfterInterruptedReplacement(localHarness(), bundles, signal);
    }, 240_000);
  }
});

describe("HTML turned on and off", () => {
  it("completes the HTML when it is turned on, removes it when turned off, then skips", async () => {
    await htmlTurnedOnAndOff(localHarness());
  }, 60_000);
});

describe("a record removed from the state", () => {
  const FILES = {
    "report.md": "# Report\n",
    "data/summary.txt": "Summary of the day\n",
    "data/table.csv": "a,b\n1,2\n",
  };

  it("is named by audit and written back by a plain run (complete, not skip_same)", async () => {
    const source = join(tmp(), "src");
    const dest = join(tmp(), "dest");
    const configPath = join(tmp(), "distributor.yml");
    await writeBundle(source, "reports.daily", "2026-06-04T10:00:00Z", FILES);
    await writeFile(configPath, singlePipelineConfig(source, dest));
    expect((await runCli(["run", "--config", configPath])).code).toBe(0);

    const statePath = join(dest, ".distributor.json");
    const state = await stateOf(dest);
    state.outputs = state.outputs.filter((o) => o.path !== "data/summary.txt");
    await writeFile(statePath, `${JSON.stringify(state, null, 2)}\n`);
    await rm(join(dest, "data/summary.txt"));

    const audited = await runCli(["audit", "--config", configPath]);
    expect(audited.code).toBe(1);
    expect(audited.stdout).toBe(
      "Audit: pipeline=reports destination=archive bundle=. status=incomplete checked=2 ok=2 missing=0 changed=0 unmanaged=0 incomplete=1\n" +
        "Incomplete: pipeline=reports destination=archive bundle=. path=data/summary.txt status=not_recorded\n",
    );
    expect(audited.stderr).toContain("a plain `distributor run`");
    const json = await runCli(["audit", "--config", configPath, "--format", "json"]);
    expect(json.code).toBe(1);
    expect(envelopeOf(json).error?.code).toBe("drift");
    expect(resultOf(json)).toMatchObject({ incomplete_count: 1, drift: true });

    const run = await runCli(["run", "--config", configPath, "--format", "json"]);
    expect(run.code, run.stderr).toBe(0);
    const completed = actionOf(run);
    expect(completed).toMatchObject({ action: "complete", status: "published" });
    expect(completed.outputs.map((o) => o.path)).toEqual(["data/summary.txt"]);
    await expectExactly(localHarness(), FILES, "2026-06-04T10:00:00Z");
    const clean = await runCli(["audit", "--config", configPath]);
    expect(clean.code, clean.stdout + clean.stderr).toBe(0);
    const again = await runCli(["run", "--config", configPath]);
    expect(again.stdout).toContain("action=skip_same status=skipped");
  });
});

describe("prune beside the publication in force", () => {
  const keepNone =
    "        path_mapping: {mode: fixed}\n        retention: {prune: {enabled: true, keep_latest: 0, older_than: 1h}}\n";

  /** Dates every record of the state a year back, past any `older_than`. */
  async function age(dest: string) {
    const state = await stateOf(dest);
    for (const output of state.outputs) output.updated_at = "2025-06-01T00:00:00Z";
    await writeFile(join(dest, ".distributor.json"), `${JSON.stringify(state, null, 2)}\n`);
  }

  it("deletes nothing of the live publication on a fixed + replace destination", async () => {
    const files_ = { "report.md": "# Report\n", "summary.txt": "Summary\n" };
    const source = join(tmp(), "src");
    const dest = join(tmp(), "dest");
    const configPath = join(tmp(), "distributor.yml");
    await writeBundle(source, "reports.daily", "2025-06-01T00:00:00Z", files_);
    await writeFile(configPath, singlePipelineConfig(source, dest, keepNone));
    expect((await runCli(["run", "--config", configPath])).code).toBe(0);
    await age(dest);
    const selector = ["--config", configPath, "--pipeline", "reports", "--destination", "archive"];

    const dry = await runCli(["prune", ...selector, "--dry-run", "--format", "json"]);
    expect(dry.code, dry.stderr).toBe(0);
    expect(resultOf(dry).planned_outputs).toEqual([]);
    const applied = await runCli(["prune", ...selector, "--apply"]);
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stdout).toContain("planned=0 deleted=0");
    await expectExactly(localHarness(), files_, "2025-06-01T00:00:00Z");
    const audited = await runCli(["audit", "--config", configPath]);
    expect(audited.code, audited.stdout + audited.stderr).toBe(0);
    const run = await runCli(["run", "--config", configPath]);
    expect(run.stdout).toContain("action=skip_same status=skipped");
  });

  it("deletes only the older bundle's leftovers on a merge destination", async () => {
    const source = join(tmp(), "src");
    const dest = join(tmp(), "dest");
    const configPath = join(tmp(), "distributor.yml");
    await writeFile(
      configPath,
      singlePipelineConfig(source, dest, `${keepNone}        reconciliation: {mode: merge}\n`),
    );
    const older = { "a.txt": "a1\n", "b.txt": "b1\n", "c.txt": "c1\n" };
    const newer = { "a.txt": "a2\n", "c.txt": "c1\n", "d.txt": "d2\n" };
    await writeBundle(source, "reports.daily", "2025-06-01T00:00:00Z", older);
    expect((await runCli(["run", "--config", configPath])).code).toBe(0);
    await writeBundle(source, "reports.daily", "2025-06-02T00:00:00Z", newer);
    const merged = await runCli(["run", "--config", configPath]);
    expect(merged.code, merged.stderr).toBe(0);
    expect(merged.stdout).toContain("action=replace_older status=published");
    expect((await stateOf(dest)).outputs.map((o) => o.path)).toEqual([
      "a.txt",
      "b.txt",
      "c.txt",
      "d.txt",
    ]);
    await age(dest);
    const selector = ["--config", configPath, "--pipeline", "reports", "--destination", "archive"];

    const dry = await runCli(["prune", ...selector, "--dry-run", "--format", "json"]);
    expect(dry.code, dry.stderr).toBe(0);
    expect((resultOf(dry).planned_outputs as Array<{ path: string }>).map((o) => o.path)).toEqual([
      "b.txt",
    ]);
    const applied = await runCli(["prune", ...selector, "--apply"]);
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stdout).toContain("planned=1 deleted=1");
    await expectExactly(localHarness(), newer, "2025-06-02T00:00:00Z");
    const audited = await runCli(["audit", "--config", configPath]);
    expect(audited.code, audited.stdout + audited.stderr).toBe(0);
    const again = await runCli(["prune", ...selector, "--apply"]);
    expect(again.stdout).toContain("planned=0 deleted=0");
  });
});
