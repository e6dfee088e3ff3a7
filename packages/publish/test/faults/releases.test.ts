import { mkdtemp, rm } from "node:fs/promises";
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
import { writeDirectoryImage } from "@distributor/storage/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type MemoryDiskHolder, registryFor } from "../support/registries.js";
import {
  expectReleases,
  expectTidy,
  lastFailureOf,
  newCase,
  publish,
  SCENARIOS,
  type Scenario,
} from "../support/release-cases.js";

// The release layout under every fault of the model (fail, crash, lost answer, hang, stall past
// the lease, blackout, power cuts) at every mutation — writes, deletes, hard links and the switch
// of `current` — of a replacement, a rollback and a restore, and power cuts after the command
// returned. After each: `current` links to a release that is exactly one publication's files
// (readers never see a mix), the state describes the release it records, and the next plain run
// (or rollback) finishes with state, `current` and bytes in agreement.

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "distributor-release-faults-"));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
}, 120_000);

async function faultCase(scenario: Scenario, kind: FaultKind, at: number) {
  const c = await newCase(root);
  await scenario.before(c);
  const seen: string[] = [];
  let stalled = false;
  const plan: FaultPlan = {
    kind,
    at,
    counter: { n: 0 },
    seen: (position, method, path) => seen.push(`${position}:${method}(${path})`),
    onStall: async () => {
      stalled = true;
      // Paused past the lease: meanwhile another run breaks it, recovers, and publishes v3.
      c.clock.offset += 10 * 60_000;
      await publish(c, "v3").catch(() => false);
    },
  };
  const where = () => `${scenario.name}, ${kind} at mutation ${at} [${seen.join(" ")}]`;
  // A power cut runs the command on a disk that can forget, and the next one on what survived
  // there (a rewritten directory would give every file another inode, which a release notices).
  const disk: MemoryDiskHolder = {};
  const succeeded = await scenario
    .act(c, registryFor("local", memoryStores(), c.dest, plan, disk))
    .catch(() => false);
  // A power cut past the command's last mutation comes after it returned.
  await cutPowerAfter(plan);
  const during = stalled ? [...scenario.during, "v3" as const] : scenario.during;
  // Whatever happened, readers see one whole publication; a success also switched, and a power
  // cut after it does not undo the switch.
  const live = await expectReleases(c, where(), during, !succeeded);
  await scenario.check?.(c, where());
  if (succeeded && plan.cut)
    expect(live, `${where()}: what the report promised`).toBe(scenario.after);
  c.clock.offset += 10 * 60_000;
  const next = isPowerCut(kind)
    ? registryFor("local", memoryStores(), c.dest, undefined, disk)
    : undefined;
  expect(
    await scenario.act(c, next),
    `${where()}: the next plain run failed: ${lastFailureOf()}`,
  ).toBe(true);
  if (disk.driver !== undefined) await writeDirectoryImage(c.dest, disk.driver.image());
  const final = await expectReleases(c, `${where()}, then again`, [scenario.after, "v3"]);
  await scenario.check?.(c, `${where()}, then again`);
  if (!stalled) expect(final, `${where()}: the release in force`).toBe(scenario.after);
  await expectTidy(c, where(), stalled && scenario.name === "a staging");
}

describe("the release layout under every fault at every mutation", () => {
  for (const scenario of SCENARIOS) {
    it(`${scenario.name} leaves current on a whole publication`, async () => {
      const clean = await newCase(root);
      await scenario.before(clean);
      const counter = { n: 0 };
      const count: FaultPlan = { kind: "count", at: 0, counter };
      expect(
        await scenario.act(clean, registryFor("local", memoryStores(), clean.dest, count)),
      ).toBe(true);
      await expectReleases(clean, `${scenario.name}, clean`, [scenario.after]);
      expect(counter.n).toBeGreaterThan(2);
      for (const kind of faultKinds()) {
        // The power may also fail after the command returned.
        const last = isPowerCut(kind) ? counter.n + 1 : counter.n;
        for (let at = 1; at <= last; at++) await faultCase(scenario, kind, at);
      }
    }, 600_000);
  }
});
