import { createHash } from "node:crypto";
import { mkdtemp, readdir, readFile, readlink, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  cutPowerAfter,
  type FaultKind,
  type FaultPlan,
  faultKinds,
  isPowerCut,
  memoryStores,
} from "@distributor/engine/testing";
import { parseSingleOwnerState } from "@distributor/state";
import { writeDirectoryImage } from "@distributor/storage/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { audit } from "../../src/maintenance/audit.js";
import { run, runSucceeded } from "../../src/run/run.js";
import { type MemoryDiskHolder, registryFor } from "../support/registries.js";
import {
  type Case,
  CORRUPT_STATE,
  expectReleases,
  expectTidy,
  lastFailureOf,
  newCase,
  SCENARIOS,
  type Scenario,
} from "../support/release-cases.js";

// The release layout with `fsync: false` under both power cuts at every mutation of a
// replacement, a rollback, a restore, a staging and a promotion, and after each returned. Without
// fsync only commits are flushed — the state, the lease, a release's snapshot and identity
// record, the switch of `current` — so a cut may lose the bytes of files the cut command put in
// a release it built, and nothing else (docs/design/power-loss.md): right after it, `current`
// links to a committed release, the state parses and records a release that exists, no
// committed release but one the command built lost a byte, and what was lost is what `audit`
// reports; `run --repair` (or, where the command wrote no file, its next plain run) then leaves
// state, `current` and bytes in agreement.

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "distributor-release-unflushed-"));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
}, 120_000);

const sha = (bytes: Buffer) => `sha256:${createHash("sha256").update(bytes).digest("hex")}`;

/** The committed releases (those with a snapshot) below `dest`, by id. */
async function committedReleases(dest: string): Promise<string[]> {
  const names = await readdir(join(dest, "releases")).catch(() => [] as string[]);
  return names
    .filter(
      (n) =>
        n.endsWith(".json") &&
        !n.includes(".files.") &&
        !n.includes(".staging.") &&
        !n.includes(".live."),
    )
    .filter((n) => !n.startsWith("."))
    .map((n) => n.slice(0, -".json".length));
}

/** The records of `document` whose bytes `releases/<id>/` does not hold, as `<id>/<path>`. */
async function unheld(dest: string, id: string, text: string): Promise<string[]> {
  const lost: string[] = [];
  for (const output of parseSingleOwnerState(text).outputs) {
    const bytes = await readFile(join(dest, "releases", id, output.path)).catch(() => undefined);
    if (bytes === undefined || sha(bytes) !== output.sha256) lost.push(`${id}/${output.path}`);
  }
  return lost;
}

/**
 * Right after the cut: what a reader or the next command relies on is a commit, and holds.
 * Returns the records (as `<release>/<path>`) of the state and of every committed release whose
 * bytes are missing or other.
 */
async function expectCommitsHeld(c: Case, where: string): Promise<string[]> {
  const link = await readlink(join(c.dest, "current"));
  expect(link, `${where}: current`).toMatch(/^releases\/[0-9T.Z-]+[0-9a-f]{4}$/);
  const live = link.slice("releases/".length);
  const committed = await committedReleases(c.dest);
  expect(committed, `${where}: current links to a committed release`).toContain(live);
  const lost = new Set<string>();
  for (const id of committed) {
    // A snapshot without its directory is never listed, promoted or linked to (see above).
    if ((await stat(join(c.dest, "releases", id)).catch(() => undefined)) === undefined) continue;
    const text = await readFile(join(c.dest, "releases", `${id}.json`), "utf8");
    expect(parseSingleOwnerState(text).release?.id, `${where}: snapshot of ${id}`).toBe(id);
    for (const path of await unheld(c.dest, id, text)) lost.add(path);
  }
  const text = await readFile(join(c.dest, ".distributor.json"), "utf8");
  // A restore cut before its commit leaves the corrupt state it found.
  if (text === CORRUPT_STATE) return [...lost];
  const recorded = parseSingleOwnerState(text).release?.id;
  expect(recorded, `${where}: the state records a release`).toBeDefined();
  const directory = await stat(join(c.dest, "releases", recorded as string)).catch(() => undefined);
  expect(directory?.isDirectory(), `${where}: the state's release ${recorded} exists`).toBe(true);
  for (const path of await unheld(c.dest, recorded as string, text)) lost.add(path);
  return [...lost].sort();
}

/**
 * What `audit` finds wrong, as `<release>/<path>`: records of the state whose bytes differ, and
 * files of committed releases changed or missing since their commit.
 */
async function audited(c: Case, backends: ReturnType<typeof registryFor>): Promise<string[]> {
  const report = await audit({ config: c.configs.v2, backends });
  const found = new Set<string>();
  for (const destination of report.destinations) {
    for (const bundle of destination.bundles) {
      const id = bundle.release?.recorded;
      for (const output of bundle.outputs) {
        if (output.status !== "ok") found.add(`${id}/${output.path}`);
      }
      for (const release of bundle.release?.releases ?? []) {
        for (const path of [...release.changed, ...release.missing]) {
          found.add(`${release.id}/${path}`);
        }
      }
    }
  }
  return [...found].sort();
}

async function unflushedCut(scenario: Scenario, kind: FaultKind, at: number): Promise<number> {
  const c = await newCase(root, { fsync: false });
  await scenario.before(c);
  const before = new Set(await committedReleases(c.dest));
  const seen: string[] = [];
  const plan: FaultPlan = {
    kind,
    at,
    counter: { n: 0 },
    seen: (position, method, path) => seen.push(`${position}:${method}(${path})`),
  };
  const disk: MemoryDiskHolder = {};
  const succeeded = await scenario
    .act(c, registryFor("local", memoryStores(), c.dest, plan, disk))
    .catch(() => false);
  await cutPowerAfter(plan);
  const where = `${scenario.name} with fsync: false, ${kind} at mutation ${at} [${seen.join(" ")}]`;
  const lost = await expectCommitsHeld(c, where);
  for (const path of lost) {
    // Releases committed before the command are never written again: their bytes stay.
    expect(before.has(path.split("/")[0] as string), `${where}: ${path} lost`).toBe(false);
  }
  if (lost.length === 0) {
    // Nothing lost: readers see one whole publication, and a success is what it reported.
    const live = await expectReleases(c, where, scenario.during, true);
    if (succeeded) expect(live, `${where}: what was reported`).toBe(scenario.after);
  }
  c.clock.offset += 10 * 60_000;
  const surviving = () => registryFor("local", memoryStores(), c.dest, undefined, disk);
  if (lost.length > 0) {
    c.damaged = new Set(lost.map((path) => path.split("/")[0] as string));
    // What was lost is what audit reports.
    expect(await audited(c, surviving()), `${where}: audit`).toEqual(lost);
    const recorded = await stateReleaseOf(c);
    if (lost.some((path) => path.startsWith(`${recorded}/`))) {
      // Lost under the release the state records: run --repair restores it.
      const report = await run({
        config: c.configs.v2,
        backends: surviving(),
        now: c.now,
        repair: true,
        lease: { renew: false },
      });
      const errors = JSON.stringify(report.actions.map((action) => action.error));
      expect(runSucceeded(report), `${where}: run --repair failed: ${errors}`).toBe(true);
    }
  }
  const next = await scenario.act(c, surviving());
  expect(next, `${where}: the next plain command failed: ${lastFailureOf()}`).toBe(true);
  if (disk.driver !== undefined) await writeDirectoryImage(c.dest, disk.driver.image());
  const final = await expectReleases(c, `${where}, then again`, [scenario.after]);
  expect(final, `${where}: the release in force`).toBe(scenario.after);
  await scenario.check?.(c, `${where}, then again`);
  // A release the cut damaged stays until retention, but is never put in force again, and
  // audit keeps reporting it.
  const left = await expectCommitsHeld(c, `${where}, then again`);
  const after = new Set([await readlink(join(c.dest, "current")), `releases/${c.staged}`]);
  for (const path of left) {
    expect(lost, `${where}: ${path} lost, then`).toContain(path);
    expect(after.has(`releases/${path.split("/")[0]}`), `${where}: ${path} in force`).toBe(false);
  }
  const reported = await audited(c, registryFor("local", memoryStores(), c.dest));
  expect(reported, `${where}: audit, then`).toEqual(expect.arrayContaining(left));
  for (const path of reported) {
    expect(c.damaged, `${where}: audit, then: ${path}`).toContain(path.split("/")[0]);
  }
  await expectTidy(c, where);
  return lost.length;
}

/** The release the state records, or undefined where it does not parse. */
async function stateReleaseOf(c: Case): Promise<string | undefined> {
  const text = await readFile(join(c.dest, ".distributor.json"), "utf8");
  try {
    return parseSingleOwnerState(text).release?.id;
  } catch {
    return undefined;
  }
}

const writesFiles = ["a replacement", "a staging"];

describe("the release layout with fsync: false under power cuts", () => {
  const kinds = faultKinds().filter(isPowerCut);
  for (const scenario of SCENARIOS) {
    it.skipIf(kinds.length === 0)(
      `${scenario.name} loses only bytes of a release it built, which run --repair restores`,
      async () => {
        const clean = await newCase(root, { fsync: false });
        await scenario.before(clean);
        const counter = { n: 0 };
        const count: FaultPlan = { kind: "count", at: 0, counter };
        expect(
          await scenario.act(clean, registryFor("local", memoryStores(), clean.dest, count)),
        ).toBe(true);
        await expectReleases(clean, `${scenario.name}, clean`, [scenario.after]);
        let cases = 0;
        let lost = 0;
        for (const kind of kinds) {
          for (let at = 1; at <= counter.n + 1; at++) {
            lost += await unflushedCut(scenario, kind, at);
            cases += 1;
          }
        }
        expect(cases).toBeGreaterThan(2);
        // The commands that put files in a release (a replacement, a staging) do lose some in
        // this model; the others write no file and lose nothing.
        if (writesFiles.includes(scenario.name)) expect(lost).toBeGreaterThan(0);
        else expect(lost).toBe(0);
      },
      240_000,
    );
  }
});
