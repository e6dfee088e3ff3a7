import { readdir, readFile, readlink, stat, symlink, unlink, writeFile } from "node:fs/promises";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { filesBelow, same, site, startReader } from "../src/testing/index.js";
import { resultOf, runCli, spawnCli, useTempDir, writeBundle } from "./helpers.js";

// `layout: releases` through the real CLI on the local filesystem: readers of `current` see one
// whole publication at every moment, unchanged files are hard links between releases, a run
// killed with SIGKILL at any point leaves `current` on a whole release and the next run
// finishes, and a rollback switches back writing nothing but the state and the link.

const tmp = useTempDir();

async function configFor(source: string, dest: string, keep = 5): Promise<string> {
  const path = join(tmp(), "distributor.yml");
  await writeFile(
    path,
    `pipelines:\n  - id: site\n    source: {backend: local, path: ${source}}\n    destinations:\n      - id: www\n        backend: local\n        path: ${dest}\n        path_mapping: {mode: fixed}\n        layout: releases\n        releases: {keep: ${keep}}\n        transfers: 4\n`,
  );
  return path;
}

async function run(config: string, ...extra: string[]) {
  return runCli(["run", "--config", config, "--format", "json", ...extra]);
}

function rollBack(config: string, ...extra: string[]) {
  return runCli([
    "rollback",
    "--config",
    config,
    "--pipeline",
    "site",
    "--destination",
    "www",
    ...extra,
  ]);
}

describe("layout: releases on a local destination", () => {
  it("switches readers from A to B whole, hard-links what did not change, and lists both", async () => {
    const source = join(tmp(), "src");
    const dest = join(tmp(), "www");
    const config = await configFor(source, dest);
    const A = site("A", 2_000);
    const B = site("B", 2_000);
    await writeBundle(source, "site", "2026-06-01T00:00:00Z", A);
    expect((await run(config)).code).toBe(0);
    const first = await readlink(join(dest, "current"));

    const reader = await startReader(dest, join(tmp(), "expected.json"), { A, B });
    await writeBundle(source, "site", "2026-06-02T00:00:00Z", B);
    const published = await run(config);
    const seen = await reader.stop();
    expect(published.code, published.stderr).toBe(0);
    const [action] = resultOf(published).actions as Array<{ action: string; outputs: unknown[] }>;
    expect(action?.action).toBe("replace_older");
    // Only what changed is written: half the pages, the index and the new file.
    expect(action?.outputs).toHaveLength(1_000 + 2);
    expect(seen.violations).toEqual([]);
    expect(seen.seen).toContain("B");
    expect(seen.polls).toBeGreaterThan(1);

    const second = await readlink(join(dest, "current"));
    expect(second).not.toBe(first);
    expect(same(await filesBelow(join(dest, second)), B)).toBe(true);
    expect(same(await filesBelow(join(dest, first)), A)).toBe(true);
    // Unchanged files are one inode in both releases; changed ones are not.
    const inode = async (release: string, path: string) =>
      (await stat(join(dest, release, path))).ino;
    expect(await inode(second, "pages/00001.html")).toBe(await inode(first, "pages/00001.html"));
    expect(await inode(second, "pages/00000.html")).not.toBe(
      await inode(first, "pages/00000.html"),
    );

    const shown = await runCli([
      "inspect",
      "--config",
      config,
      "--pipeline",
      "site",
      "--destination",
      "www",
    ]);
    expect(shown.code, shown.stderr).toBe(0);
    const releases = shown.stdout.split("\n").filter((line) => line.startsWith("Release: "));
    expect(releases).toHaveLength(2);
    expect(releases[0]).toMatch(
      / current=no recorded=no source_id=site source_created=2026-06-01T00:00:00Z /,
    );
    expect(releases[1]).toMatch(
      / current=yes recorded=yes source_id=site source_created=2026-06-02T00:00:00Z /,
    );
    const audited = await runCli(["audit", "--config", config, "--format", "json"]);
    expect(audited.code, audited.stdout).toBe(0);

    // As a run that died between its commit and its switch leaves it: audit says so, and the
    // next run — one that skips — switches.
    await unlink(join(dest, "current"));
    await symlink(first, join(dest, "current"));
    const unswitched = await runCli(["audit", "--config", config]);
    expect(unswitched.code).toBe(1);
    expect(unswitched.stdout).toMatch(/ status=not_current .* release=\S+ current=\S+/);
    expect(unswitched.stderr).toContain(
      "whose current link is not the release their state records",
    );
    const again = await run(config);
    expect((resultOf(again).actions as Array<{ action: string }>)[0]?.action).toBe("skip_same");
    expect(await readlink(join(dest, "current"))).toBe(second);
    const refused = await runCli([
      "prune",
      "--config",
      config,
      "--pipeline",
      "site",
      "--destination",
      "www",
      "--dry-run",
    ]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("layout: releases");
  }, 120_000);

  it("rolls back writing nothing but the state and the link, and the next run of that source skips", async () => {
    const source = join(tmp(), "src");
    const dest = join(tmp(), "www");
    const config = await configFor(source, dest);
    await writeBundle(source, "site", "2026-06-01T00:00:00Z", site("A", 9_998, 10_000));
    expect((await run(config)).code).toBe(0);
    const first = await readlink(join(dest, "current"));
    await writeBundle(source, "site", "2026-06-02T00:00:00Z", site("B", 9_998, 10_000));
    expect((await run(config)).code).toBe(0);
    const second = await readlink(join(dest, "current"));
    const before = await statsBelow(join(dest, "releases"));

    const dry = await rollBack(config, "--previous", "--dry-run", "--format", "json");
    expect(dry.code, dry.stderr).toBe(0);
    expect(resultOf(dry)).toMatchObject({
      from: second.slice(9),
      to: first.slice(9),
      switched: false,
    });
    expect(await readlink(join(dest, "current"))).toBe(second);

    const back = await rollBack(config, "--previous", "--format", "json");
    expect(back.code, back.stderr).toBe(0);
    const report = resultOf(back) as {
      from: string;
      to: string;
      switched: boolean;
      switch_ms: number;
    };
    expect(report).toMatchObject({ from: second.slice(9), to: first.slice(9), switched: true });
    // Measured, not asserted (bench/README.md has the figures): the switch of a 10 000-file release.
    console.log(`rollback of a 10 000-file release: switch_ms=${report.switch_ms}`);
    expect(await readlink(join(dest, "current"))).toBe(first);
    // Not one file of any release was written, linked or removed.
    expect(await statsBelow(join(dest, "releases"))).toEqual(before);
    const audited = await runCli(["audit", "--config", config]);
    expect(audited.code, audited.stdout).toBe(0);

    // The source of the release in force again: skipped. Rolling forward with --to works too.
    await writeBundle(source, "site", "2026-06-01T00:00:00Z", site("A", 9_998, 10_000));
    const skipped = await run(config);
    expect((resultOf(skipped).actions as Array<{ action: string }>)[0]?.action).toBe("skip_same");
    const forward = await rollBack(config, "--to", second.slice(9));
    expect(forward.code, forward.stderr).toBe(0);
    expect(forward.stdout).toMatch(
      /^Rollback: pipeline=site destination=www bundle=\. from=\S+ to=\S+ status=switched /,
    );
    expect(await readlink(join(dest, "current"))).toBe(second);
    const unknown = await rollBack(config, "--to", "20990101T000000.000Z-abcd");
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("has no committed release 20990101T000000.000Z-abcd");
  }, 180_000);

  it("keeps current on a whole release when a run is killed with SIGKILL at any point", async () => {
    const source = join(tmp(), "src");
    const dest = join(tmp(), "www");
    const config = await configFor(source, dest, 2);
    const versions = ["A", "B", "C", "D", "E", "F"];
    const sets = Object.fromEntries(versions.map((v) => [v, site(v, 1_500)]));
    await writeBundle(source, "site", "2026-06-01T00:00:00Z", sets.A as Record<string, string>);
    expect((await run(config)).code).toBe(0);
    // Each later version is killed after a different delay: before, while and after it writes.
    for (const [index, version] of versions.slice(1).entries()) {
      await writeBundle(
        source,
        "site",
        `2026-06-0${index + 2}T00:00:00Z`,
        sets[version] as Record<string, string>,
      );
      const victim = spawnCli(["run", "--config", config]);
      await new Promise((resolve) => setTimeout(resolve, 150 + index * 250));
      victim.kill("SIGKILL");
      await victim.done;
      const live = await filesBelow(join(dest, await readlink(join(dest, "current"))));
      const whole = versions.filter((v) => same(live, sets[v] as Record<string, string>));
      expect(whole, `killed ${version} after ${150 + index * 250} ms`).toHaveLength(1);
      const next = await run(config);
      expect(next.code, `${version}: ${next.stdout}`).toBe(0);
      expect(
        same(
          await filesBelow(join(dest, await readlink(join(dest, "current")))),
          sets[version] as Record<string, string>,
        ),
      ).toBe(true);
      const audited = await runCli(["audit", "--config", config]);
      expect(audited.code, audited.stdout).toBe(0);
    }
    // Retention kept two committed releases (and the run's leftovers of killed ones are gone).
    const names = await readdir(join(dest, "releases"));
    const records = names.filter((name) => name.endsWith(".files.json"));
    const snapshots = names.filter(
      (name) => name.endsWith(".json") && !records.includes(name) && !name.endsWith(".live.json"),
    );
    expect(snapshots).toHaveLength(2);
    // Each kept release has its identity record, and nothing else does.
    expect(records).toHaveLength(2);
  }, 180_000);

  it("applies a saved plan as the release it planned", async () => {
    const source = join(tmp(), "src");
    const dest = join(tmp(), "www");
    const config = await configFor(source, dest);
    await writeBundle(source, "site", "2026-06-01T00:00:00Z", site("A", 20));
    expect((await run(config)).code).toBe(0);
    await writeBundle(source, "site", "2026-06-02T00:00:00Z", site("B", 20));
    const planFile = join(tmp(), "plan.json");
    const planned = await runCli(["run", "--config", config, "--plan-out", planFile]);
    expect(planned.code, planned.stderr).toBe(0);
    const saved = JSON.parse(await readFile(planFile, "utf8")) as {
      destinations: Array<{ next_state: { release: { id: string } } }>;
    };
    const id = saved.destinations[0]?.next_state.release.id;
    expect(id).toMatch(/^\d{8}T/);
    const applied = await runCli(["apply", "--config", config, planFile]);
    expect(applied.code, applied.stdout + applied.stderr).toBe(0);
    expect(await readlink(join(dest, "current"))).toBe(`releases/${id}`);
    expect(same(await filesBelow(join(dest, "current")), site("B", 20))).toBe(true);
  }, 60_000);

  it("refuses to switch an existing in-place bundle path to releases, and back", async () => {
    const source = join(tmp(), "src");
    await writeBundle(source, "site", "2026-06-01T00:00:00Z", { "index.html": "<p>x</p>\n" });
    const configAt = async (name: string, dest: string, layout: string) => {
      const path = join(tmp(), `${name}.yml`);
      await writeFile(
        path,
        `pipelines:\n  - id: site\n    source: {backend: local, path: ${source}}\n    destinations:\n      - {id: www, backend: local, path: ${dest}, path_mapping: {mode: fixed}${layout}}\n`,
      );
      return path;
    };
    const inPlace = join(tmp(), "in-place");
    const released = join(tmp(), "released");
    expect((await runCli(["run", "--config", await configAt("a", inPlace, "")])).code).toBe(0);
    const refused = await runCli([
      "run",
      "--config",
      await configAt("b", inPlace, ", layout: releases"),
    ]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("was published in place (the default layout)");
    expect(
      (await runCli(["run", "--config", await configAt("c", released, ", layout: releases")])).code,
    ).toBe(0);
    const back = await runCli(["run", "--config", await configAt("d", released, "")]);
    expect(back.code).toBe(1);
    expect(back.stderr).toContain("was published with layout: releases");
  }, 60_000);
});

/** Inode, size and mtime of every entry below `dir`: equal before and after means nothing was touched. */
async function statsBelow(dir: string): Promise<Record<string, string>> {
  const found: Record<string, string> = {};
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    const path = join(entry.parentPath, entry.name);
    const info = await stat(path);
    found[relative(dir, path)] = `${info.ino} ${info.size} ${info.mtimeMs}`;
  }
  return found;
}
