import { createHash } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  cutPowerAfter,
  expectAgreement,
  type FaultKind,
  type FaultPlan,
  faultKinds,
  isPowerCut,
  memoryStores,
  writeSourceBundle,
} from "@distributor/engine/testing";
import { parseSingleOwnerState } from "@distributor/state";
import { createLocalBackend, type StorageBackend } from "@distributor/storage";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BackendRegistry } from "../../src/backends/registry.js";
import { type Config, parseConfig } from "../../src/config/index.js";
import { applyPlan } from "../../src/plan-file/apply.js";
import { encodePlan, parsePlan } from "../../src/plan-file/codec.js";
import type { SavedPlan } from "../../src/plan-file/saved-plan.js";
import { planRun } from "../../src/run/plan-run.js";
import { run, runSucceeded } from "../../src/run/run.js";
import { registryFor } from "../support/registries.js";

// `apply` of a plan saved by `run --plan-out` (a replacement: one file rewritten, one new, one
// deleted, one kept), under both power cuts at every mutation and after it returned, with fsync
// and without. After the cut, before any recovery: with fsync, every state without a
// `replacing` marker holds the bytes of every output it records, and an apply reported
// `published` lost nothing; without fsync, only outputs the apply wrote may lack their bytes, and
// `run --repair` restores them. Then the next plain `run` ends as a clean apply does.

const V1 = { "a.md": "# A one\n", "b.txt": "b one\n", "docs/c.txt": "c one\n" };
const V2 = { "a.md": "# A two\n", "b.txt": "b one\n", "d.txt": "d two\n" };

interface Case {
  dest: string;
  config: (version: "v1" | "v2") => Config;
  /** The saved plan, as `apply` reads it from its file. */
  plan: SavedPlan;
}

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "distributor-apply-power-"));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
}, 120_000);

const backendsOf = (c: Case, plan?: FaultPlan) =>
  registryFor("local", memoryStores(), c.dest, plan);

async function newCase(fsync: boolean): Promise<Case> {
  const dir = await mkdtemp(join(root, "case-"));
  const dest = join(dir, "dest");
  for (const [version, files, hour] of [
    ["v1", V1, 1],
    ["v2", V2, 2],
  ] as const) {
    await writeSourceBundle(createLocalBackend({ root: join(dir, version) }), "", files, {
      id: "reports.example",
      created: new Date(Date.UTC(2026, 5, 4, hour)),
    });
  }
  const config = (version: "v1" | "v2") =>
    parseConfig(
      `pipelines:\n  - id: reports\n    source: {backend: local, path: ${join(dir, version)}}\n    destinations:\n      - id: archive\n        backend: local\n        path: ${dest}\n${fsync ? "" : "        fsync: false\n"}`,
    );
  const c = { dest, config } as Case;
  expect(runSucceeded(await run({ config: config("v1"), backends: backendsOf(c) }))).toBe(true);
  const { plan } = await planRun({ config: config("v2"), backends: backendsOf(c) });
  if (plan === null) throw new Error("no plan");
  // Through the plan file's text, as `run --plan-out` then `apply` hand it over.
  c.plan = parsePlan(encodePlan(plan), "plan.json");
  return c;
}

async function apply(c: Case, backends: BackendRegistry): Promise<boolean> {
  const report = await applyPlan({
    plan: c.plan,
    config: c.config("v2"),
    backends,
    lease: { renew: false },
  });
  return runSucceeded(report) && report.actions.every((action) => action.status === "published");
}

async function destinationOf(c: Case): Promise<StorageBackend> {
  const factory = backendsOf(c).local;
  if (factory === undefined) throw new Error("no local factory");
  return factory({ backend: "local", path: c.dest } as never, { role: "destination" });
}

/**
 * Records of the state whose bytes are missing or other, right now; none for a state whose
 * `replacing` marker admits a replacement under way, unless `marked` counts those too.
 */
async function unheld(c: Case, marked: boolean): Promise<string[]> {
  const backend = await destinationOf(c);
  const text = Buffer.from(await backend.readFile(".distributor.json")).toString();
  const state = parseSingleOwnerState(text);
  if (state.replacing !== undefined && !marked) return [];
  const lost: string[] = [];
  for (const output of state.outputs) {
    const bytes = await backend.readFile(output.path).catch(() => undefined);
    const digest = bytes && `sha256:${createHash("sha256").update(bytes).digest("hex")}`;
    if (digest !== output.sha256) lost.push(output.path);
  }
  return lost;
}

async function cutCase(
  fsync: boolean,
  kind: FaultKind,
  at: number,
  expected: Record<string, string>,
): Promise<number> {
  const c = await newCase(fsync);
  const seen: string[] = [];
  const written = new Set<string>();
  const plan: FaultPlan = {
    kind,
    at,
    counter: { n: 0 },
    seen: (position, method, path) => {
      seen.push(`${position}:${method}(${path})`);
      if (method === "writeFile") written.add(path);
    },
  };
  const published = await apply(c, backendsOf(c, plan)).catch(() => false);
  await cutPowerAfter(plan);
  const where = `apply${fsync ? "" : " with fsync: false"}, ${kind} at mutation ${at} [${seen.join(" ")}]`;
  // Without fsync a marked state's records can have lost bytes too, which no recovery notices.
  const lost = await unheld(c, !fsync);
  const later = new Date(Date.now() + 10 * 60_000);
  if (fsync) {
    // The state never records an output whose bytes a cut can lose.
    expect(lost, `${where}: records without their bytes`).toEqual([]);
    if (published) {
      const recorded = await expectAgreement(await destinationOf(c), {
        debris: true,
        label: where,
      });
      expect(recorded, `${where}: what the report promised`).toEqual(expected);
    }
  } else {
    for (const path of lost) expect(written, `${where}: ${path} lost`).toContain(path);
    if (lost.length > 0) {
      const report = await run({
        config: c.config("v2"),
        backends: backendsOf(c),
        now: () => later,
        repair: true,
      });
      const errors = JSON.stringify(report.actions.map((action) => action.error));
      expect(runSucceeded(report), `${where}: run --repair: ${errors}`).toBe(true);
    }
  }
  // The next plain run, later (a cut run's lease has expired by then).
  const report = await run({ config: c.config("v2"), backends: backendsOf(c), now: () => later });
  const errors = JSON.stringify(report.actions.map((action) => action.error));
  expect(runSucceeded(report), `${where}: the next plain run: ${errors}`).toBe(true);
  const recorded = await expectAgreement(await destinationOf(c), {
    label: `${where}, then the next plain run`,
    staleLeasesAt: later,
  });
  expect(recorded, `${where}: recorded outputs`).toEqual(expected);
  return lost.length;
}

describe.each([true, false])("apply of a saved plan under power cuts, fsync: %s", (fsync) => {
  const kinds = faultKinds().filter(isPowerCut);
  it.skipIf(kinds.length === 0)(
    fsync
      ? "records only durable bytes, keeps what it reported, and the next plain run converges"
      : "loses only bytes it wrote, which run --repair restores, and the next plain run converges",
    async () => {
      const clean = await newCase(fsync);
      const counter = { n: 0 };
      const count: FaultPlan = { kind: "count", at: 0, counter };
      expect(await apply(clean, backendsOf(clean, count))).toBe(true);
      const expected = await expectAgreement(await destinationOf(clean), { label: "clean" });
      expect(counter.n).toBeGreaterThan(3);
      let lost = 0;
      for (const kind of kinds) {
        for (let at = 1; at <= counter.n + 1; at++) {
          lost += await cutCase(fsync, kind, at, expected);
        }
      }
      // The loss fsync: false admits does happen in this model.
      if (!fsync) expect(lost).toBeGreaterThan(0);
    },
    120_000,
  );
});
