import { readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
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
      "Audit: pipeline=reports destination=archive bundle=. status=ok checked=3 ok=3 missing=0 changed=0 unmanaged=0\n",
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
      "Audit: pipeline=reports destination=archive bundle=. status=drift checked=3 ok=0 missing=1 changed=2 unmanaged=1",
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
    const [destination] = report.destinations as Array<Record<string, unknown>>;
    const [bundle] = destination?.bundles as Array<Record<string, unknown>>;
    expect(bundle?.outputs).toEqual([
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
    expect(bundle?.unmanaged_entries).toEqual([{ path: "notes.txt", type: "file", size: 12 }]);
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
