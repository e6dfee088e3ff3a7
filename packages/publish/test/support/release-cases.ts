import { createHash } from "node:crypto";
import { mkdtemp, readdir, readFile, readlink, stat, writeFile } from "node:fs/promises";
import { join, relative } from "node:path";
import { memoryStores, writeSourceBundle } from "@distributor/engine/testing";
import { parseSingleOwnerState } from "@distributor/state";
import { createLocalBackend, isTempFileName } from "@distributor/storage";
import { expect } from "vitest";
import type { BackendRegistry } from "../../src/backends/registry.js";
import { type Config, parseConfig } from "../../src/config/index.js";
import { adoptOutputs } from "../../src/maintenance/adopt.js";
import { promote } from "../../src/maintenance/promote.js";
import { rollback } from "../../src/maintenance/rollback.js";
import { run, runSucceeded, stage } from "../../src/run/run.js";
import { registryFor } from "./registries.js";

// The release layout's fault cases (test/faults/releases*.test.ts): three versions of a site,
// the commands each scenario runs, and what readers of `current` rely on after each fault.

const V1 = { "index.html": "<p>one</p>\n", "a.css": "a one\n", "docs/c.txt": "c one\n" };
const V2 = { "index.html": "<p>two</p>\n", "a.css": "a one\n", "d.js": "d two\n" };
const V3 = { "index.html": "<p>three</p>\n", "docs/c.txt": "c three\n", "e.txt": "e three\n" };
export const VERSIONS = { v1: V1, v2: V2, v3: V3 } as const;
export type Version = keyof typeof VERSIONS;

export interface Case {
  dir: string;
  dest: string;
  clock: { offset: number };
  now: () => Date;
  configs: Record<Version, Config>;
  /** The release a rollback returns to (the first one published). */
  first?: string;
  /** The release staged before a promotion. */
  staged?: string;
  /**
   * Releases whose files a power cut without fsync damaged after their commit: kept until
   * retention, reported by audit, never made live or reported as staged again.
   */
  damaged?: ReadonlySet<string>;
}

export async function newCase(root: string, { fsync = true } = {}): Promise<Case> {
  const dir = await mkdtemp(join(root, "case-"));
  const dest = join(dir, "dest");
  const clock = { offset: 0 };
  const configs = {} as Record<Version, Config>;
  for (const [index, version] of (["v1", "v2", "v3"] as const).entries()) {
    await writeSourceBundle(
      createLocalBackend({ root: join(dir, version) }),
      "",
      VERSIONS[version],
      {
        id: "site.example",
        created: new Date(Date.UTC(2026, 5, 4, index + 1)),
      },
    );
    configs[version] = parseConfig(
      `pipelines:\n  - id: site\n    source: {backend: local, path: ${join(dir, version)}}\n    destinations:\n      - id: www\n        backend: local\n        path: ${dest}\n        path_mapping: {mode: fixed}\n        layout: releases\n        releases: {keep: 3}\n${fsync ? "" : "        fsync: false\n"}`,
    );
  }
  return { dir, dest, clock, now: () => new Date(Date.now() + clock.offset), configs };
}

/** Why the last command of a case failed, for the message of the assertion that follows. */
let lastFailure = "";
export const lastFailureOf = () => lastFailure;

export async function publish(
  c: Case,
  version: Version,
  backends?: BackendRegistry,
): Promise<boolean> {
  const report = await run({
    config: c.configs[version],
    backends: backends ?? registryFor("local", memoryStores(), c.dest),
    now: c.now,
    lease: { renew: false },
  });
  lastFailure = JSON.stringify(report.actions.map((action) => action.error));
  return runSucceeded(report);
}

/** `run --stage` of `version`; the release it staged is remembered in `c.staged`. */
export async function stageRun(
  c: Case,
  version: Version,
  backends?: BackendRegistry,
): Promise<boolean> {
  const report = await stage({
    config: c.configs[version],
    backends: backends ?? registryFor("local", memoryStores(), c.dest),
    now: c.now,
    lease: { renew: false },
  });
  lastFailure = JSON.stringify(
    report.actions.map(({ status, action, error }) => ({ status, action, error })),
  );
  const [action] = report.actions;
  if (action?.status === "staged") c.staged = action.release_id ?? undefined;
  // A newer source published meanwhile (the stall case) makes staging this one a skip.
  const superseded = action?.status === "skipped" && action.action === "skip_destination_newer";
  return runSucceeded(report) && (action?.status === "staged" || superseded);
}

/**
 * `promote --to` the release staged before. A refusal with `not_staged` is what an operator
 * meets once a newer publication went live meanwhile (the stall case): that promotion is over.
 */
export async function promoteStaged(c: Case, backends?: BackendRegistry): Promise<boolean> {
  try {
    await promote({
      config: c.configs.v2,
      pipelineId: "site",
      destinationId: "www",
      to: c.staged,
      backends: backends ?? registryFor("local", memoryStores(), c.dest),
      now: c.now,
      lease: { renew: false },
    });
    return true;
  } catch (error) {
    lastFailure = String(error);
    return (error as { code?: string }).code === "not_staged";
  }
}

/**
 * A staged release is all or nothing: every release with a snapshot that `current` does not
 * link to holds exactly one publication's files, and its snapshot records exactly those bytes.
 */
export async function expectStagedWhole(c: Case, label: string): Promise<void> {
  const releases = join(c.dest, "releases");
  const link = (await readlink(join(c.dest, "current"))).slice("releases/".length);
  for (const name of await readdir(releases)) {
    const id = name.slice(0, -".json".length);
    if (
      !name.endsWith(".json") ||
      name.includes(".files.") ||
      name.includes(".staging.") ||
      name.includes(".live.")
    )
      continue;
    if (id === link || c.damaged?.has(id)) continue;
    // A snapshot written late by a staging run stalled past its lease, after the run that took
    // over removed its uncommitted directory: no directory, so never listed or promoted (and
    // retention removes the snapshot).
    const directory = await stat(join(releases, id)).catch(() => undefined);
    if (directory === undefined) continue;
    const files = await filesBelow(join(releases, id));
    const which = (Object.keys(VERSIONS) as Version[]).filter(
      (version) => JSON.stringify(files) === JSON.stringify(sortedFiles(VERSIONS[version])),
    );
    expect(which, `${label}: committed release ${id} holds ${JSON.stringify(files)}`).toHaveLength(
      1,
    );
    // Its snapshot records exactly those bytes: what a promotion would put in force.
    const snapshot = parseSingleOwnerState(await readFile(join(releases, name), "utf8"));
    expect(snapshot.release?.id, `${label}: snapshot of ${id}`).toBe(id);
    const records = Object.fromEntries(snapshot.outputs.map((o) => [o.path, o.sha256]));
    const bytes = Object.fromEntries(Object.entries(files).map(([p, text]) => [p, sha(text)]));
    expect(bytes, `${label}: records = bytes of staged ${id}`).toEqual(records);
  }
}

export async function rollBack(c: Case, backends?: BackendRegistry): Promise<boolean> {
  try {
    await rollback({
      config: c.configs.v2,
      pipelineId: "site",
      destinationId: "www",
      to: c.first,
      backends: backends ?? registryFor("local", memoryStores(), c.dest),
      now: c.now,
      lease: { renew: false },
    });
    return true;
  } catch (error) {
    lastFailure = String(error);
    return false;
  }
}

/** What a corrupt state holds in the restore scenario. */
export const CORRUPT_STATE = "{ not a state";

/**
 * `reconcile-state --rebuild`: the corrupt state restored from the snapshot of the release
 * `current` links to. A state that is valid already (an earlier attempt restored it) is refused
 * with `state_valid`, which is what the operator reads as done.
 */
export async function restore(c: Case, backends?: BackendRegistry): Promise<boolean> {
  try {
    await adoptOutputs({
      config: c.configs.v2,
      pipelineId: "site",
      destinationId: "www",
      mode: "rebuild",
      backends: backends ?? registryFor("local", memoryStores(), c.dest),
      now: c.now,
      lease: { renew: false },
    });
    return true;
  } catch (error) {
    lastFailure = String(error);
    return (error as { code?: string }).code === "state_valid";
  }
}

/** Every file below `dir`, by path relative to it, with its text. */
export async function filesBelow(dir: string): Promise<Record<string, string>> {
  const files: Record<string, string> = {};
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    files[relative(dir, path)] = await readFile(path, "utf8");
  }
  return sortedFiles(files);
}

export const sha = (text: string) => `sha256:${createHash("sha256").update(text).digest("hex")}`;

/**
 * The promise readers rely on: `current` links to a release holding exactly one publication's
 * files. Returns which one. The state describes the release it records, byte for byte; that
 * release is the one `current` links to unless `pending` allows a commit not yet switched to.
 */
export async function expectReleases(
  c: Case,
  label: string,
  allowed: readonly Version[],
  pending = false,
): Promise<Version> {
  const link = await readlink(join(c.dest, "current"));
  expect(link, `${label}: current`).toMatch(/^releases\/[0-9T.Z-]+[0-9a-f]{4}$/);
  const live = await filesBelow(join(c.dest, link));
  const match = allowed.find(
    (version) => JSON.stringify(live) === JSON.stringify(sortedFiles(VERSIONS[version])),
  );
  expect(match, `${label}: current holds ${JSON.stringify(live)}`).toBeDefined();
  const text = await readFile(join(c.dest, ".distributor.json"), "utf8");
  // A restore that did not get as far as its commit leaves the corrupt state as it was.
  if (pending && text === CORRUPT_STATE) return match as Version;
  const state = parseSingleOwnerState(text);
  const recorded = `releases/${state.release?.id}`;
  if (!pending) {
    expect(recorded, `${label}: the state records the release current links to`).toBe(link);
  }
  // A state marked by a run part-way (its deletes after the commit not done) does not promise
  // that its records describe the release yet: readers never see that release before they do.
  if (state.replacing !== undefined && pending) return match as Version;
  const described = await filesBelow(join(c.dest, recorded));
  const records = Object.fromEntries(state.outputs.map((o) => [o.path, o.sha256]));
  const bytes = Object.fromEntries(Object.entries(described).map(([p, text]) => [p, sha(text)]));
  expect(bytes, `${label}: records = bytes of ${recorded}`).toEqual(records);
  return match as Version;
}

export function sortedFiles(files: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(files).sort(([a], [b]) => (a < b ? -1 : 1)));
}

/** After a clean finish: nothing half-made is in force, and no temp file is in a committed release. */
export async function expectTidy(c: Case, label: string, stalled = false) {
  const releases = join(c.dest, "releases");
  const names = await readdir(releases);
  // A write killed between its temp file and its rename (of a snapshot, an identity record)
  // leaves the temp file beside the releases: the next run that holds the lease removes it.
  const temps = names.filter((name) => isTempFileName(name));
  expect(temps, `${label}: temp files in releases/`).toEqual([]);
  for (const name of names) {
    if (name.endsWith(".staging.json")) {
      // What a staging run abandoned (like the directory of a release never committed): never
      // read as a state, and removed by the next run that builds a release. Its release is not
      // staged unless the snapshot was written, which `expectStagedWhole` checks.
      continue;
    }
    if (name.endsWith(".live.json")) {
      // A live record says its release went live; a retention killed part-way may leave it
      // after its release (nothing reads one without its release).
      continue;
    }
    if (name.endsWith(".files.json")) {
      // An identity record belongs to a committed release: its snapshot is beside it — but for
      // what a staging run that stalled past its lease wrote late, which only the next run that
      // builds a release removes (nothing reads it: its release was never committed).
      if (stalled) continue;
      const snapshot = `${name.slice(0, -".files.json".length)}.json`;
      expect(names, `${label}: ${name} without ${snapshot}`).toContain(snapshot);
    } else if (name.endsWith(".json")) {
      await expect(
        stat(join(releases, name.slice(0, -5))),
        `${label}: ${name}`,
      ).resolves.toBeDefined();
      const files = await readdir(join(releases, name.slice(0, -5)), { recursive: true });
      const temps = files.filter((file) => isTempFileName(file.split("/").pop() ?? ""));
      expect(temps, `${label}: temp files in committed release ${name}`).toEqual([]);
    }
  }
}

export interface Scenario {
  name: string;
  before(c: Case): Promise<void>;
  act(c: Case, backends?: BackendRegistry): Promise<boolean>;
  /** What `current` may hold while and after the faulted command runs. */
  during: readonly Version[];
  /** What it holds once the next plain command finished (without a competing run). */
  after: Version;
  /** Checked after the faulted command and after the next one. */
  check?(c: Case, label: string): Promise<void>;
}

export const SCENARIOS: Scenario[] = [
  {
    name: "a replacement",
    before: async (c) => {
      expect(await publish(c, "v1")).toBe(true);
    },
    act: (c, backends) => publish(c, "v2", backends),
    during: ["v1", "v2"],
    after: "v2",
  },
  {
    name: "a rollback",
    before: async (c) => {
      expect(await publish(c, "v1")).toBe(true);
      c.first = (await readlink(join(c.dest, "current"))).slice("releases/".length);
      expect(await publish(c, "v2")).toBe(true);
    },
    act: (c, backends) => rollBack(c, backends),
    during: ["v1", "v2"],
    after: "v1",
  },
  {
    name: "a restore of a corrupt state",
    before: async (c) => {
      expect(await publish(c, "v1")).toBe(true);
      expect(await publish(c, "v2")).toBe(true);
      await writeFile(join(c.dest, ".distributor.json"), CORRUPT_STATE);
    },
    act: (c, backends) => restore(c, backends),
    during: ["v2"],
    after: "v2",
  },
  {
    name: "a staging",
    before: async (c) => {
      expect(await publish(c, "v1")).toBe(true);
    },
    act: (c, backends) => stageRun(c, "v2", backends),
    // Nothing live changes: readers see v1 throughout, and the state keeps recording it.
    during: ["v1"],
    after: "v1",
    check: expectStagedWhole,
  },
  {
    name: "a promotion",
    before: async (c) => {
      expect(await publish(c, "v1")).toBe(true);
      expect(await stageRun(c, "v2")).toBe(true);
    },
    act: (c, backends) => promoteStaged(c, backends),
    during: ["v1", "v2"],
    after: "v2",
    check: expectStagedWhole,
  },
];
