import { readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { envelopeOf, resultOf, runCli, useTempDir, writeBundle } from "./helpers.js";

// `reconcile-state --bundle-path` through the real CLI: a `preserve_relative` destination (the
// default mapping) keeps one state per bundle path, and each mode of the command maintains the
// one it is pointed at — the others stay as they were.

const tmp = useTempDir();

async function setUp() {
  const source = join(tmp(), "src");
  const dest = join(tmp(), "www");
  for (const day of ["day1", "day2"]) {
    await writeBundle(join(source, day), `report.${day}`, "2026-06-01T00:00:00Z", {
      "a.txt": `a ${day}\n`,
      "b.txt": `b ${day}\n`,
    });
  }
  const config = join(tmp(), "distributor.yml");
  await writeFile(
    config,
    `pipelines:\n  - id: reports\n    source: {backend: local, path: ${source}}\n    destinations:\n      - {id: www, backend: local, path: ${dest}}\n`,
  );
  expect((await runCli(["run", "--config", config])).code).toBe(0);
  return { source, dest, config };
}

const owner = (config: string) => [
  "--config",
  config,
  "--pipeline",
  "reports",
  "--destination",
  "www",
];

describe("reconcile-state --bundle-path", () => {
  it("drops the records of missing outputs of that bundle path alone", async () => {
    const { dest, config } = await setUp();
    await rm(join(dest, "day1/b.txt"));
    await writeFile(join(dest, "day1/notes.txt"), "mine\n");
    const other = await readFile(join(dest, "day2/.distributor.json"));

    // Without the flag it looks at the root, which keeps no state, and says where they are.
    const root = await runCli(["reconcile-state", ...owner(config), "--format", "json"]);
    expect(root.code).toBe(1);
    expect(envelopeOf(root).error?.code).toBe("state_not_found");
    // Its advice, as written with this destination, is what the test runs next.
    expect(envelopeOf(root).error?.message).toContain("--bundle-path day1");

    const dry = await runCli([
      "reconcile-state",
      ...owner(config),
      "--bundle-path",
      "day1",
      "--dry-run",
      "--format",
      "json",
    ]);
    expect(dry.code, dry.stderr).toBe(0);
    expect(resultOf(dry)).toMatchObject({
      bundle_path: "day1",
      checked_count: 2,
      missing_managed_outputs: [{ path: "b.txt", storage_status: "missing" }],
      unmanaged_entries: [{ path: "notes.txt", type: "file" }],
      would_change: true,
      changed: false,
    });
    const repaired = await runCli(["reconcile-state", ...owner(config), "--bundle-path", "day1"]);
    expect(repaired.code, repaired.stderr).toBe(0);
    expect(repaired.stdout).toMatch(
      /status=changed checked=2 missing=1 unmanaged=1 .* bundle=day1\n$/,
    );
    const state = JSON.parse(await readFile(join(dest, "day1/.distributor.json"), "utf8"));
    expect(state.outputs.map((output: { path: string }) => output.path)).toEqual(["a.txt"]);
    expect(await readFile(join(dest, "day2/.distributor.json"))).toEqual(other);
    // Then the records and the files agree: a repair run puts b.txt back.
    const again = await runCli(["run", "--config", config, "--repair"]);
    expect(again.code, again.stderr).toBe(0);
    expect(await readFile(join(dest, "day1/b.txt"), "utf8")).toBe("b day1\n");
  }, 60_000);

  it("rebuilds an invalid state of that bundle path alone, and refuses one nothing publishes to", async () => {
    const { dest, config } = await setUp();
    await writeFile(join(dest, "day2/.distributor.json"), "{ not json");
    const rebuilt = await runCli([
      "reconcile-state",
      ...owner(config),
      "--rebuild",
      "--bundle-path",
      "day2",
      "--format",
      "json",
    ]);
    expect(rebuilt.code, rebuilt.stderr).toBe(0);
    const bundles = resultOf(rebuilt).bundles as Array<{ bundle_path: string; changed: boolean }>;
    expect(bundles).toEqual([expect.objectContaining({ bundle_path: "day2", changed: true })]);
    expect((await runCli(["audit", "--config", config])).code).toBe(0);

    const nowhere = await runCli([
      "reconcile-state",
      ...owner(config),
      "--adopt",
      "--bundle-path",
      "day9",
      "--format",
      "json",
    ]);
    expect(nowhere.code).toBe(1);
    expect(envelopeOf(nowhere).error?.code).toBe("bundle_path_not_published");
    expect(envelopeOf(nowhere).error?.message).toContain("day1, day2");
  }, 60_000);
});
