import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  Crash,
  expectAgreement,
  FAULT_KINDS,
  type FaultKind,
  type FaultPlan,
  faultyBackend,
  writeSourceBundle,
} from "@distributor/engine/testing";
import {
  createLocalBackend,
  createMemoryBackend,
  LEASE_FILE_NAME,
  type StorageBackend,
} from "@distributor/storage";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BackendRegistry } from "../../src/backends/registry.js";
import { type Config, parseConfig } from "../../src/config/index.js";
import { run, runSucceeded } from "../../src/run/run.js";
import type { RunReport } from "../../src/run/types.js";

// Random interleavings of runs of three pipelines over overlapping destinations on the real
// filesystem, with the faults of the model (docs/design/commit-protocol.md) at random mutations:
// - `site`, a shared root that `alpha` and `beta` both publish to (disjoint paths, one shared
//   nested directory), holding an operator's unmanaged file;
// - `solo`, a single-owner destination that `alpha` and `gamma` both target: whichever publishes
//   there first owns it, and the other is refused.
// Each step runs one pipeline, or two at once; a run may meet one fault; a stall lets another
// pipeline's run (one not in the step) break the lease and run to its end while the clock jumps
// past the lease. Sources are in memory; the destinations are on the real filesystem.
// Invariants: (1) a run that reports success (at a destination) leaves that destination in
// agreement, right after it (temp files and leases allowed); (2) once everything is quiet and every
// pipeline has run once more, plainly, every destination is in agreement with no debris but an
// expired lease a skip never reads,
// holds exactly each owner's newest version, and the unmanaged file is untouched.

const PIPELINES = ["alpha", "beta", "gamma"] as const;
type Pipeline = (typeof PIPELINES)[number];
type DestinationId = "site" | "solo";

const TARGETS: Record<Pipeline, readonly DestinationId[]> = {
  alpha: ["site", "solo"],
  beta: ["site"],
  gamma: ["solo"],
};
/** Paths each pipeline's bundles draw from: disjoint in the shared root, one nested directory. */
const PATHS: Record<Pipeline, readonly string[]> = {
  alpha: ["a1.txt", "a2.txt", "sub/a3.txt"],
  beta: ["b1.txt", "b2.txt", "sub/b3.txt"],
  gamma: ["g1.txt", "sub/g2.txt", "sub/g3.txt"],
};
const CONTENTS = ["", "1\n", "2\n", "22\n", "333\n"] as const;
const UNMANAGED_PATH = "operator-notes.txt";
const UNMANAGED = { [UNMANAGED_PATH]: "kept by the operator\n" };
/** Longer than a lease lives (60 s by default): what a jump of the clock past it takes. */
const PAST_THE_LEASE_MS = 10 * 60_000;

const CI = process.env.CI !== undefined && process.env.CI !== "";
// `.ci/run` runs the suite again on further Node lines; those passes set a smaller count, since
// the interleavings do not depend on the Node line.
const NUM_RUNS = Number(process.env.DISTRIBUTOR_PROPERTY_RUNS) || (CI ? 1000 : 100);
// A fixed seed, so that CI explores the same cases each time and a failure replays exactly; set
// DISTRIBUTOR_PROPERTY_SEED to explore others. (A random seed found the open case below.)
const SEED = Number(process.env.DISTRIBUTOR_PROPERTY_SEED) || 20261202;

type Files = Record<string, string>;

const bundleOf = (pipeline: Pipeline) =>
  fc.dictionary(fc.constantFrom(...PATHS[pipeline]), fc.constantFrom(...CONTENTS), {
    minKeys: 1,
    maxKeys: PATHS[pipeline].length,
  });
const versionsOf = (pipeline: Pipeline) =>
  fc.array(bundleOf(pipeline), { minLength: 2, maxLength: 3 });

interface FaultSpec {
  kind: FaultKind;
  /** The 1-based mutation of the run it hits; beyond the run's last mutation it hits nothing. */
  at: number;
}

interface RunSpec {
  pipeline: Pipeline;
  /** Index into the pipeline's versions (taken modulo their number). */
  version: number;
  fault: FaultSpec | undefined;
}

interface Step {
  runs: RunSpec[];
  /** For two runs at once: how long the second starts after the first (ms). */
  stagger: number;
  /** Which version the stall's competitor publishes (modulo). */
  competitorVersion: number;
  /** For a single run: which other pipeline competes on a stall (1 or 2 places further). */
  competitorOffset: number;
}

const faultSpec: fc.Arbitrary<FaultSpec | undefined> = fc.option(
  fc.record({ kind: fc.constantFrom(...FAULT_KINDS), at: fc.integer({ min: 1, max: 14 }) }),
  { nil: undefined, freq: 3 },
);
const runSpec = (pipeline: Pipeline): fc.Arbitrary<RunSpec> =>
  fc.record({ pipeline: fc.constant(pipeline), version: fc.nat({ max: 2 }), fault: faultSpec });

const step: fc.Arbitrary<Step> = fc
  .record({
    first: fc.nat({ max: 2 }),
    /** A third of the steps run two pipelines at once. */
    concurrent: fc.nat({ max: 2 }).map((n) => n === 0),
    offset: fc.integer({ min: 1, max: 2 }),
    stagger: fc.constantFrom(0, 0, 1, 3),
    competitorVersion: fc.nat({ max: 2 }),
  })
  .chain(({ first, concurrent, offset, stagger, competitorVersion }) => {
    const a = PIPELINES[first] as Pipeline;
    const b = PIPELINES[(first + offset) % 3] as Pipeline;
    const runs = concurrent ? fc.tuple(runSpec(a), runSpec(b)) : fc.tuple(runSpec(a));
    return runs.map(
      (specs): Step => ({
        // One stall per step: its competitor is the pipeline no run of the step belongs to.
        runs: specs.map((spec, index) =>
          index === 1 && spec.fault?.kind === "stall" && specs[0]?.fault?.kind === "stall"
            ? { ...spec, fault: { ...spec.fault, kind: "hang" } }
            : spec,
        ),
        stagger,
        competitorVersion,
        competitorOffset: offset,
      }),
    );
  });

const scenario = fc.record({
  versions: fc.record({
    alpha: versionsOf("alpha"),
    beta: versionsOf("beta"),
    gamma: versionsOf("gamma"),
  }),
  /**
   * The version `beta` publishes to the shared root before the operator's file is put there (a
   * shared root without state holding a file is unmanaged content, which every run refuses).
   */
  seed: fc.nat({ max: 2 }),
  // Two to six steps, mostly two or three (every counterexample found so far needed at most
  // three); the longer sequences keep the rarer interleavings reachable.
  steps: fc.oneof(
    { weight: 3, arbitrary: fc.array(step, { minLength: 2, maxLength: 3 }) },
    { weight: 1, arbitrary: fc.array(step, { minLength: 4, maxLength: 6 }) },
  ),
});
type Scenario = typeof scenario extends fc.Arbitrary<infer T> ? T : never;

/** What the sequences reached, so that a run of the property shows it exercised the protocol. */
const coverage = {
  cases: 0,
  runs: 0,
  concurrentSteps: 0,
  faultsHit: Object.fromEntries(FAULT_KINDS.map((kind) => [kind, 0])) as Record<FaultKind, number>,
  succeeded: 0,
  checkedRightAfter: 0,
  /** Successes whose check met another owner's lease (its run's pending work) and waited for (2). */
  deferredToQuiescence: 0,
  competitorsSucceeded: 0,
  actions: new Map<string, number>(),
};

/** Where the destinations of every case lie (emptied before each case). */
let paths: Record<DestinationId, string>;
/**
 * One configuration per pipeline, as two teams' configurations would be: one file may not point
 * two single-owner destinations at one location (the configuration check refuses it), but two
 * files can, and `solo` is exactly that case. Each run is given its source.
 */
let configs: Record<Pipeline, Config>;
let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "distributor-interleavings-"));
  paths = { site: join(root, "site"), solo: join(root, "solo") };
  const destination: Record<DestinationId, string> = {
    site: `      - {id: site, backend: local, path: ${paths.site}, fsync: false, state: {mode: shared_root}}\n`,
    solo: `      - {id: solo, backend: local, path: ${paths.solo}, fsync: false}\n`,
  };
  // Sources are in memory (the runs are given them): only the destinations are under test.
  configs = Object.fromEntries(
    PIPELINES.map((pipeline) => [
      pipeline,
      parseConfig(
        `pipelines:\n  - id: ${pipeline}\n    source: {backend: local, path: ${join(root, pipeline)}}\n    destinations:\n${TARGETS[pipeline].map((id) => destination[id]).join("")}`,
      ),
    ]),
  ) as Record<Pipeline, Config>;
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

interface Case {
  paths: Record<DestinationId, string>;
  versions: Record<Pipeline, Files[]>;
  configs: Record<Pipeline, Config>;
  /** The source of one pipeline holding one of its versions (written on first use). */
  source(pipeline: Pipeline, version: number): Promise<StorageBackend>;
  clock: { offset: number };
  now: () => Date;
}

async function newCase(input: Scenario): Promise<Case> {
  for (const path of Object.values(paths)) await rm(path, { recursive: true, force: true });
  const sources = new Map<string, StorageBackend>();
  const source = async (pipeline: Pipeline, version: number) => {
    const versions = input.versions[pipeline];
    const index = version % versions.length;
    const key = `${pipeline}-v${index + 1}`;
    let found = sources.get(key);
    if (found === undefined) {
      found = createMemoryBackend({ label: key });
      await writeSourceBundle(found, "", versions[index] as Files, {
        id: `${pipeline}.bundle`,
        created: new Date(Date.UTC(2026, 5, 4, index + 1)),
      });
      sources.set(key, found);
    }
    return found;
  };
  const clock = { offset: 0 };
  return {
    paths,
    versions: input.versions,
    configs,
    source,
    clock,
    now: () => new Date(Date.now() + clock.offset),
  };
}

/** Runs one pipeline publishing one of its versions; `plan` injects a fault at its destinations. */
async function runPipeline(
  c: Case,
  pipeline: Pipeline,
  version: number,
  plan?: FaultPlan,
): Promise<RunReport> {
  return run({
    config: c.configs[pipeline],
    pipelineIds: [pipeline],
    sources: { [pipeline]: await c.source(pipeline, version) },
    backends: registryFor(c, plan),
    now: c.now,
    lease: { renew: false },
  });
}

/** A process of the simulation: once one of its backends crashed, none of them answers again. */
interface Process {
  dead: boolean;
}

function within(backend: StorageBackend, simulated: Process): StorageBackend {
  return new Proxy(backend, {
    get(target, property) {
      const value = Reflect.get(target, property, target);
      if (typeof value !== "function") return value;
      return async (...args: unknown[]) => {
        if (simulated.dead) throw new Crash("the process is gone");
        try {
          return await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        } catch (error) {
          if (error instanceof Crash) simulated.dead = true;
          throw error;
        }
      };
    },
  });
}

/** Local backends; both destinations wrapped by `plan` (one mutation counter per run). */
function registryFor(c: Case, plan?: FaultPlan): BackendRegistry {
  const destinations = new Set(Object.values(c.paths));
  const simulated: Process = { dead: false };
  return {
    local: async (location) => {
      const backend = createLocalBackend({
        root: location.path,
        ...(location.fsync === undefined ? {} : { fsync: location.fsync }),
      });
      if (plan === undefined || !destinations.has(location.path)) return backend;
      return within(faultyBackend(backend, plan), simulated);
    },
  };
}

function destinationOf(c: Case, id: DestinationId): StorageBackend {
  return createLocalBackend({ root: c.paths[id] });
}

/** The pipeline whose lease lies at a destination, `null` for none ("?" when unreadable). */
async function leaseOwner(c: Case, id: DestinationId): Promise<string | null> {
  let text: string;
  try {
    text = await readFile(join(c.paths[id], LEASE_FILE_NAME), "utf8");
  } catch {
    return null;
  }
  try {
    return (JSON.parse(text) as { owner: { pipeline_id: string } }).owner.pipeline_id;
  } catch {
    return "?";
  }
}

const unmanagedAt = (id: DestinationId) => (id === "site" ? UNMANAGED : {});

function countActions(report: RunReport) {
  for (const action of report.actions) {
    const key = `${action.destination_id}:${action.action ?? "none"}:${action.status}`;
    coverage.actions.set(key, (coverage.actions.get(key) ?? 0) + 1);
  }
}

/**
 * Invariant (1), for each destination where a run reported success (`runSucceeded` for the whole
 * run; a run that failed at one destination still reports success at the others, which fan out
 * independently): it is in agreement (temp files and leases allowed), unless a lease of another
 * pipeline lies there now. Such a lease belongs to a run of the same step (leases of earlier
 * steps are stale, and a run breaks and recovers any it meets): that run holds it and is
 * writing, or failed and left its journal for the next run to recover. Its pending work is not
 * this run's to answer for; (2) checks what it leaves. Checked right after the run; when two
 * runs went at once, once both have ended (before that the other may be half-way through).
 */
async function expectReportedInAgreement(
  c: Case,
  pipeline: Pipeline,
  report: RunReport,
  label: string,
) {
  for (const action of report.actions) {
    if (action.status === "failed") continue;
    const id = action.destination_id as DestinationId;
    const owner = await leaseOwner(c, id);
    if (owner !== null && owner !== pipeline) {
      coverage.deferredToQuiescence += 1;
      continue;
    }
    coverage.checkedRightAfter += 1;
    // The success vouches for this pipeline's publication; another owner of a shared root may
    // be left incomplete by the recovery this run made of its dead run, until its next run.
    await expectAgreement(destinationOf(c, id), {
      unmanaged: unmanagedAt(id),
      debris: true,
      label: `${label}: ${pipeline} reported ${action.action} ${action.status} at ${id}`,
      wholeFor: [pipeline],
    });
  }
}

async function expectUnmanagedUntouched(c: Case, label: string) {
  for (const [path, text] of Object.entries(UNMANAGED)) {
    const found = await readFile(join(c.paths.site, path), "utf8").catch(() => "(missing)");
    expect(found, `${label}: unmanaged ${path}`).toBe(text);
  }
}

/** `alpha v2 stall@5`: the pipeline, the version it publishes (1-based), and its fault. */
const describeRun = (c: Case, spec: RunSpec) =>
  `${spec.pipeline} v${(spec.version % c.versions[spec.pipeline].length) + 1}${spec.fault ? ` ${spec.fault.kind}@${spec.fault.at}` : ""}`;

async function runStep(c: Case, s: Step, index: number) {
  const concurrent = s.runs.length > 1;
  if (concurrent) coverage.concurrentSteps += 1;
  const inStep = new Set(s.runs.map((r) => r.pipeline));
  const first = s.runs[0] as RunSpec;
  const competitor = concurrent
    ? (PIPELINES.find((p) => !inStep.has(p)) as Pipeline)
    : (PIPELINES[(PIPELINES.indexOf(first.pipeline) + s.competitorOffset) % 3] as Pipeline);
  const stepLabel = `step ${index + 1} [${s.runs.map((spec) => describeRun(c, spec)).join(" ‖ ")}]`;
  /** Checks that wait for the end of the step (other runs were in flight when they succeeded). */
  const deferred: Array<() => Promise<void>> = [];

  const runOne = async (spec: RunSpec, delay: number) => {
    if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
    const seen: string[] = [];
    const plan: FaultPlan | undefined =
      spec.fault === undefined
        ? undefined
        : {
            kind: spec.fault.kind,
            at: spec.fault.at,
            counter: { n: 0 },
            hangMs: 5,
            seen: (position, method, path) => {
              seen.push(`${position}:${method}(${path})`);
              if (position === spec.fault?.at) coverage.faultsHit[spec.fault.kind] += 1;
            },
            onStall: async () => {
              // Paused past its lease: meanwhile another pipeline's run breaks it and commits.
              c.clock.offset += PAST_THE_LEASE_MS;
              const report = await runPipeline(c, competitor, s.competitorVersion);
              countActions(report);
              if (runSucceeded(report)) coverage.competitorsSucceeded += 1;
              const label = `${stepLabel}: stall competitor ${competitor} v${(s.competitorVersion % c.versions[competitor].length) + 1}`;
              const check = () => expectReportedInAgreement(c, competitor, report, label);
              // Alone, the stalled run waits for it: right after it is now.
              if (concurrent) deferred.push(check);
              else await check();
            },
          };
    coverage.runs += 1;
    let report: RunReport | undefined;
    try {
      report = await runPipeline(c, spec.pipeline, spec.version, plan);
    } catch (error) {
      if (!(error instanceof Crash)) throw error;
    }
    if (report === undefined) return;
    countActions(report);
    if (runSucceeded(report)) coverage.succeeded += 1;
    const label = `${stepLabel}: ${describeRun(c, spec)} [${seen.join(" ")}]`;
    const check = () => expectReportedInAgreement(c, spec.pipeline, report, label);
    if (concurrent) deferred.push(check);
    else await check();
  };

  await Promise.all(s.runs.map((spec, i) => runOne(spec, i === 0 ? 0 : s.stagger)));
  for (const check of deferred) await check();
  await expectUnmanagedUntouched(c, stepLabel);
  // The step's processes are gone: on this host their leases are stale from now on (restic's
  // rule, docs/design/commit-protocol.md); the clock jump is how this one process shows the next runs that.
  c.clock.offset += PAST_THE_LEASE_MS;
}

/** The newest version's files of each pipeline, as the last plain runs leave them. */
function newest(c: Case, pipeline: Pipeline): Files {
  const versions = c.versions[pipeline];
  return versions[versions.length - 1] as Files;
}

async function recordedOwners(c: Case, id: DestinationId) {
  const text = await readFile(join(c.paths[id], ".distributor.json"), "utf8").catch(() => null);
  if (text === null) return undefined;
  return JSON.parse(text) as {
    pipeline_id?: string;
    outputs: Array<{ path: string; owner?: { pipeline_id: string } }>;
  };
}

async function quiesce(c: Case) {
  // Long after: every lease left behind is stale.
  c.clock.offset += PAST_THE_LEASE_MS;
  // First a rollback: each pipeline's oldest source put back and run plainly. Wherever it
  // reports success (published, completed, or skipped because the destination keeps a newer
  // source), the destination holds the whole publication of the source its state records for
  // that pipeline; a skip over an incomplete newer publication fails instead, saying so.
  const succeededAt: Record<"site" | "solo", string[]> = { site: [], solo: [] };
  for (const pipeline of PIPELINES) {
    const report = await runPipeline(c, pipeline, 0);
    countActions(report);
    expect(report.pipeline_errors, `rollback run of ${pipeline}`).toEqual([]);
    for (const action of report.actions) {
      if (action.status === "failed") {
        expect(
          ["conflict", "not_owner", "incomplete_publication", "unmanaged"],
          `rollback run of ${pipeline} at ${action.destination_id}: ${action.reason}`,
        ).toContain(action.error?.code);
      } else {
        succeededAt[action.destination_id as "site" | "solo"].push(pipeline);
      }
    }
  }
  for (const id of ["site", "solo"] as const) {
    // A rollback run that skips reads the state alone: what a killed run left (its lease, a
    // temp file) waits for the next write, which the plain runs below make.
    await expectAgreement(destinationOf(c, id), {
      unmanaged: unmanagedAt(id),
      label: `after the rollback runs, ${id}`,
      debris: true,
      wholeFor: succeededAt[id],
    });
  }
  for (const pipeline of PIPELINES) {
    const versions = c.versions[pipeline].length;
    const soloOwner = (await recordedOwners(c, "solo"))?.pipeline_id;
    const report = await runPipeline(c, pipeline, versions - 1);
    countActions(report);
    expect(report.pipeline_errors, `plain run of ${pipeline}`).toEqual([]);
    for (const action of report.actions) {
      // The one refusal by design: the single-owner destination belongs to the other pipeline.
      const refused =
        action.destination_id === "solo" &&
        action.action === "fail_conflict" &&
        soloOwner !== undefined &&
        soloOwner !== pipeline;
      if (refused) continue;
      expect(
        action.status,
        `plain run of ${pipeline} at ${action.destination_id}: ${action.action} ${action.error ?? ""}`,
      ).not.toBe("failed");
    }
  }
  for (const id of ["site", "solo"] as const) {
    const recorded = await expectAgreement(destinationOf(c, id), {
      unmanaged: unmanagedAt(id),
      label: `after the plain runs, ${id}`,
      staleLeasesAt: c.now(),
    });
    // Each owner holds exactly its newest version.
    const state = await recordedOwners(c, id);
    const owners =
      id === "site"
        ? (["alpha", "beta"] as const)
        : ([state?.pipeline_id] as (Pipeline | undefined)[]);
    const expected: Record<string, string> = {};
    for (const owner of owners) {
      expect(owner, `${id} has an owner`).toBeDefined();
      for (const [path, text] of Object.entries(newest(c, owner as Pipeline))) {
        expected[path] = text;
      }
    }
    const onDisk: Record<string, string> = {};
    for (const path of Object.keys(recorded)) {
      onDisk[path] = await readFile(join(c.paths[id], path), "utf8");
    }
    expect(onDisk, `after the plain runs, ${id} holds each owner's newest version`).toEqual(
      expected,
    );
  }
  await expectUnmanagedUntouched(c, "after the plain runs");
}

/** One case: the shared root's first owner and the operator's file, the steps, then quiescence. */
async function checkCase(input: Scenario) {
  coverage.cases += 1;
  const c = await newCase(input);
  try {
    const seed = await runPipeline(c, "beta", input.seed);
    expect(runSucceeded(seed), "seed publication").toBe(true);
    await writeFile(join(c.paths.site, UNMANAGED_PATH), UNMANAGED[UNMANAGED_PATH]);
    for (const [index, s] of input.steps.entries()) await runStep(c, s, index);
    await quiesce(c);
  } finally {
    for (const path of Object.values(c.paths)) await rm(path, { recursive: true, force: true });
  }
}

const runOf = (pipeline: Pipeline, version: number, fault?: FaultSpec): RunSpec => ({
  pipeline,
  version,
  fault,
});
const alone = (spec: RunSpec, competitorOffset = 1, competitorVersion = 0): Step => ({
  runs: [spec],
  stagger: 0,
  competitorVersion,
  competitorOffset,
});
/** Small versions: `beta` v1 → v2 rewrites `b1.txt` in place; `alpha` v2 is v1 published again. */
const SMALL: Scenario["versions"] = {
  alpha: [{ "a1.txt": "1\n" }, { "a1.txt": "1\n" }],
  beta: [{ "b1.txt": "1\n" }, { "b1.txt": "2\n" }],
  gamma: [{ "g1.txt": "1\n" }, { "g1.txt": "1\n" }],
};

/**
 * Minimal counterexamples the property found (shrunk by hand from fast-check's; each replays
 * exactly, none needs two runs at once). The mutations of a run publishing one file at `site`
 * are: 1 the lease, 2 its journal, 3 the output, 4 the lease confirmed, 5 the state, 6 the
 * release. A run that breaks a stale lease whose holder replaced a file in place: 1 the
 * takeover, 2-3 the lease, 4 the state without that file's record, 5 the file's delete.
 */
const FOUND: Array<{ name: string; input: Scenario }> = [
  {
    // beta v2 stalls just before overwriting b1.txt in place; alpha breaks the stale lease,
    // recovers (b1.txt still holds v1's bytes) and commits its own record; then beta's write
    // goes ahead: its compare-and-swap is on b1.txt's version, which nobody changed. The state
    // records v1's b1.txt, the file holds v2's, no lease is left: alpha's next run (a skip)
    // reports success over a destination that is not in agreement.
    name: "a stalled overwrite in place lands after another run broke the lease",
    input: {
      versions: SMALL,
      seed: 0,
      steps: [alone(runOf("beta", 1, { kind: "stall", at: 3 }), 2), alone(runOf("alpha", 0))],
    },
  },
  {
    // alpha v2 stalls just before its state write at the shared root; beta breaks the stale
    // lease, recovers it (deleting a1.txt, which no state records yet) and skips (its source
    // is published); alpha's state write goes ahead, its compare-and-swap on a state version
    // nobody changed: alpha reports publish_new published, its state records a1.txt, which is
    // gone, and every later plain run of alpha is skip_same over it.
    name: "a stalled state write commits outputs that another run's recovery deleted",
    input: {
      versions: SMALL,
      seed: 0,
      steps: [alone(runOf("alpha", 1, { kind: "stall", at: 5 }), 1)],
    },
  },
  {
    // beta v2's overwrite of b1.txt is done but its answer lost: beta fails, its lease lists
    // b1.txt as replaced in place. alpha's recovery finds b1.txt changed, drops its record
    // (state written), and its delete of b1.txt fails: b1.txt stays, recorded by no state and
    // journaled nowhere. beta v1 then skips (its record still names v1) and reports success
    // beside it; beta v2's next publication is refused, fail_unmanaged on b1.txt.
    name: "recovery drops a record, then fails to delete its file: the file is orphaned",
    input: {
      versions: SMALL,
      seed: 0,
      steps: [
        alone(runOf("beta", 1, { kind: "lost_answer", at: 3 })),
        alone(runOf("alpha", 0, { kind: "fail", at: 5 })),
        alone(runOf("beta", 0)),
      ],
    },
  },
  {
    // gamma's first publication at solo stalls just before its state write (no state there
    // yet, so nothing can fence it); alpha, running beside it, breaks the stale lease and
    // recovers it, deleting g1.txt; gamma's state create then lands, recording g1.txt, which is
    // gone. Found with 1 000 cases on CI; gamma must not report success, and the state must
    // not go on recording the missing file.
    name: "a stalled first commit lands where no state could fence it",
    input: {
      versions: SMALL,
      seed: 0,
      steps: [
        {
          runs: [runOf("alpha", 0), runOf("gamma", 0, { kind: "stall", at: 5 })],
          stagger: 1,
          competitorVersion: 2,
          competitorOffset: 2,
        },
        {
          runs: [runOf("alpha", 0), runOf("beta", 0)],
          stagger: 0,
          competitorVersion: 0,
          competitorOffset: 1,
        },
      ],
    },
  },
];

const EMPTY_VERSIONS: Scenario["versions"] = {
  alpha: [{ "a1.txt": "" }, { "a1.txt": "" }],
  beta: [{ "b1.txt": "" }, { "b1.txt": "" }],
  gamma: [{ "g1.txt": "" }, { "g1.txt": "" }],
};

const OPEN_CASE: Scenario = {
  versions: EMPTY_VERSIONS,
  seed: 0,
  steps: [
    {
      runs: [runOf("beta", 0), runOf("gamma", 0)],
      stagger: 0,
      competitorVersion: 0,
      competitorOffset: 1,
    },
    {
      runs: [runOf("alpha", 0, { kind: "blackout", at: 2 })],
      stagger: 0,
      competitorVersion: 2,
      competitorOffset: 1,
    },
    { runs: [runOf("gamma", 0)], stagger: 0, competitorVersion: 0, competitorOffset: 1 },
    {
      runs: [runOf("beta", 0, { kind: "stall", at: 5 }), runOf("gamma", 0)],
      stagger: 0,
      competitorVersion: 1,
      competitorOffset: 1,
    },
  ],
};

describe("interleaved runs of three pipelines over shared destinations, with faults", () => {
  it(
    "leave every destination in agreement: after each success, and for good after plain runs",
    async () => {
      await fc.assert(fc.asyncProperty(scenario, checkCase), { numRuns: NUM_RUNS, seed: SEED });
      // The sequences reach what the property is about.
      for (const kind of FAULT_KINDS) expect(coverage.faultsHit[kind]).toBeGreaterThan(0);
      expect(coverage.concurrentSteps).toBeGreaterThan(0);
      expect(coverage.competitorsSucceeded).toBeGreaterThan(0);
      expect(coverage.actions.get("solo:fail_conflict:failed") ?? 0).toBeGreaterThan(0);
      expect(coverage.actions.get("site:replace_older:published") ?? 0).toBeGreaterThan(0);
    },
    CI ? 900_000 : 180_000,
  );

  describe("counterexamples it found", () => {
    it.each(FOUND)("$name", async ({ input }) => {
      await checkCase(input);
    });
    // Found with a random seed: a journal write whose answer is lost and cannot be read back
    // (blackout) made the run's release refuse (the lease's version had moved on without the
    // run learning it), leaving alpha's lease behind; two steps later beta, stalled at its state
    // write at site, was taken over by alpha v2, whose run then reported publish_new published
    // while the a1.txt it records was missing. A release now reads a refused lease back and
    // deletes it when it is still this run's.
    it("a lost journal write, then a stall at the state write", async () => {
      await checkCase(OPEN_CASE);
    });
  });
});
