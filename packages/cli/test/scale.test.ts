import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { envelopeOf, resultOf, runCli } from "./helpers.js";

// A publication of more than 100 000 files through the real CLI: nothing in manifest create,
// discovery, the destination walk, the lease journal, the state, audit or prune may stop at
// 100 000 entries or at a fixed manifest size (this manifest is 18 MB, over the 16 MiB floor:
// its bound follows validation.max_files), and a lease of a few seconds (test-only
// DISTRIBUTOR_LEASE_TTL_MS) must be renewed on time all along, though the publication outlasts
// it. Sizes, not speed: nothing here is timed. The replacement at the end changes 1 % of the
// files and writes only those.

let directory = "";
const tmp = () => directory;
beforeEach(async () => {
  directory = await mkdtemp(join(tmpdir(), "distributor-scale-"));
});
// Removing 200 000 files takes longer than a hook's default 10 s.
afterEach(() => rm(directory, { recursive: true, force: true }), 300_000);
const FILES = 100_001;
const DIRECTORIES = 100;
/**
 * Renewals come every third of it; a run stalled for two thirds would fail on its own lease. The
 * publication takes about 20 s on an idle 2-core machine, and more under a loaded test run.
 */
const ENV = { DISTRIBUTOR_LEASE_TTL_MS: "12000" };

const directoryOf = (index: number) => `section-${String(index % DIRECTORIES).padStart(2, "0")}`;
const pathOf = (index: number) =>
  `${directoryOf(index)}/page-${String(index).padStart(6, "0")}-of-the-archive.txt`;

async function writeSource(dir: string): Promise<void> {
  for (let d = 0; d < DIRECTORIES; d++) await mkdir(join(dir, directoryOf(d)), { recursive: true });
  const writes: Promise<void>[] = [];
  for (let index = 0; index < FILES; index++) {
    writes.push(writeFile(join(dir, pathOf(index)), `${index}\n`));
    if (writes.length === 512) await Promise.all(writes.splice(0));
  }
  await Promise.all(writes);
}

/** Files below `dir`, the state file left out. */
async function countFiles(dir: string): Promise<number> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries.filter((entry) => entry.isFile() && entry.name !== ".distributor.json").length;
}

describe(`a publication of ${FILES} files`, () => {
  it("publishes, skips, prunes, audits and replaces 1 % with its lease renewed all along", async () => {
    const source = join(tmp(), "src");
    const dest = join(tmp(), "dest");
    await writeSource(source);
    // manifest create's own limit names the flag that raises it.
    const refused = await runCli(["manifest", "create", "--id", "scale", source]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      `bundle holds ${FILES} files, more than the limit 100000 (--max-files, default 100000); pass --max-files ${FILES} or more to list them`,
    );
    const manifest = (created: Date) =>
      runCli([
        "manifest",
        "create",
        "--id",
        "scale",
        "--max-files",
        "200000",
        "--force",
        "--created",
        created.toISOString().replace(/\.\d{3}Z$/, "Z"),
        source,
      ]);
    const created = await manifest(new Date(Date.now() - 7_200_000));
    expect(created.code, created.stderr).toBe(0);
    expect((await stat(join(source, "manifest.json"))).size).toBeGreaterThan(16 * 1024 * 1024);

    const config = join(tmp(), "distributor.yml");
    await writeFile(
      config,
      `pipelines:
  - id: scale
    source: {backend: local, path: ${source}}
    validation: {max_files: 200000}
    destinations:
      - id: site
        backend: local
        path: ${dest}
        fsync: false
        retention:
          prune: {enabled: true, keep_latest: 0}
`,
    );
    const run = () => runCli(["run", "--config", config, "--format", "json"], { env: ENV });

    const first = await run();
    expect(first.code, first.stderr).toBe(0);
    expect(resultOf(first).actions).toMatchObject([{ action: "publish_new" }]);
    expect(await countFiles(dest)).toBe(FILES);

    const again = await run();
    expect(again.code, again.stderr).toBe(0);
    expect(resultOf(again).actions).toMatchObject([{ action: "skip_same" }]);

    const pruneArgs = ["prune", "--config", config, "--pipeline", "scale", "--destination", "site"];
    // Every output belongs to the publication in force: prune reads them all and keeps them all.
    const pruned = await runCli([...pruneArgs, "--apply", "--format", "json"], { env: ENV });
    expect(pruned.code, pruned.stderr).toBe(0);
    expect(envelopeOf(pruned).ok).toBe(true);
    expect(await countFiles(dest)).toBe(FILES);

    const clean = await runCli(["audit", "--config", config, "--format", "json"]);
    expect(clean.code, clean.stdout).toBe(0);
    const skipped = await run();
    expect(resultOf(skipped).actions).toMatchObject([{ action: "skip_same" }]);

    // A newer source with one file in a hundred changed: only those are written.
    const changed = Array.from({ length: FILES }, (_, index) => index).filter((i) => i % 100 === 0);
    for (const index of changed) await writeFile(join(source, pathOf(index)), `${index} v2\n`);
    const recreated = await manifest(new Date(Date.now() - 3_600_000));
    expect(recreated.code, recreated.stderr).toBe(0);
    const replaced = await run();
    expect(replaced.code, replaced.stderr).toBe(0);
    const [replacement] = resultOf(replaced).actions as { action: string; outputs: unknown[] }[];
    expect(replacement?.action).toBe("replace_older");
    expect(replacement?.outputs).toHaveLength(changed.length);
    expect(await countFiles(dest)).toBe(FILES);
    expect(await readFile(join(dest, pathOf(100)), "utf8")).toBe("100 v2\n");
    const audited = await runCli(["audit", "--config", config, "--format", "json"]);
    expect(audited.code, audited.stdout).toBe(0);
  }, 900_000);
});
