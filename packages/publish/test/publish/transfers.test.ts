import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { writeSourceBundle } from "@distributor/engine/testing";
import { createLocalBackend, LEASE_FILE_NAME, STATE_FILE_NAME } from "@distributor/storage";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/index.js";
import { run, runSucceeded } from "../../src/run/run.js";
import { aroundWrites } from "../support/registries.js";

// A destination's `transfers` bounds how many outputs are written at once; absent, the backend's
// own default (`writeConcurrency`) does.

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "distributor-transfers-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const FILES = Object.fromEntries(
  Array.from({ length: 40 }, (_, i) => [`data/${String(i).padStart(2, "0")}.txt`, `file ${i}\n`]),
);

/** Publishes FILES and returns the most output writes that were in flight at once. */
async function mostInFlight(transfers: number | undefined): Promise<number> {
  const src = join(dir, `src-${transfers}`);
  const dest = join(dir, `dest-${transfers}`);
  await writeSourceBundle(createLocalBackend({ root: src }), "", FILES, { id: "reports.daily" });
  let inFlight = 0;
  let most = 0;
  const backends = aroundWrites(dest, async (path, write) => {
    const name = path.slice(path.lastIndexOf("/") + 1);
    if (name === STATE_FILE_NAME || name === LEASE_FILE_NAME) return write();
    inFlight += 1;
    most = Math.max(most, inFlight);
    try {
      // Long enough that every write the run allows has started before one ends.
      await new Promise((resolve) => setTimeout(resolve, 5));
      return await write();
    } finally {
      inFlight -= 1;
    }
  });
  const setting = transfers === undefined ? "" : `\n        transfers: ${transfers}`;
  const config = parseConfig(
    `pipelines:\n  - id: reports\n    source: {backend: local, path: ${src}}\n    destinations:\n      - id: site\n        backend: local\n        path: ${dest}${setting}\n`,
  );
  const report = await run({ config, backends });
  expect(runSucceeded(report), JSON.stringify(report.actions)).toBe(true);
  return most;
}

describe("transfers", () => {
  it("writes at most that many outputs at once", async () => {
    expect(await mostInFlight(1)).toBe(1);
    expect(await mostInFlight(3)).toBe(3);
    expect(await mostInFlight(32)).toBe(32);
  });

  it("falls back to the backend's own default (local: 16)", async () => {
    expect(await mostInFlight(undefined)).toBe(16);
  });
});

describe("write order", () => {
  it("writes assets first, HTML pages next and index pages last, each phase done first", async () => {
    const src = join(dir, "src-order");
    const dest = join(dir, "dest-order");
    const files: Record<string, string> = {};
    for (let i = 0; i < 12; i++) {
      files[`assets/${i}.js`] = `js ${i}\n`;
      files[`pages/${i}.html`] = `<p>${i}</p>\n`;
    }
    files["index.html"] = "<p>home</p>\n";
    files["pages/index.html"] = "<p>pages</p>\n";
    await writeSourceBundle(createLocalBackend({ root: src }), "", files, { id: "site.daily" });
    const events: string[] = [];
    const backends = aroundWrites(dest, async (path, write) => {
      const name = path.slice(path.lastIndexOf("/") + 1);
      if (name === STATE_FILE_NAME || name === LEASE_FILE_NAME) return write();
      events.push(`start ${path}`);
      await new Promise((resolve) => setTimeout(resolve, 2));
      const result = await write();
      events.push(`end ${path}`);
      return result;
    });
    const config = parseConfig(
      `pipelines:\n  - id: site\n    source: {backend: local, path: ${src}}\n    destinations:\n      - id: web\n        backend: local\n        path: ${dest}\n`,
    );
    const report = await run({ config, backends });
    expect(runSucceeded(report), JSON.stringify(report.actions)).toBe(true);
    const phaseOf = (path: string) =>
      path.endsWith("index.html") ? 2 : path.endsWith(".html") ? 1 : 0;
    // No write of a phase starts before every write of the phase before it has ended.
    for (const phase of [1, 2]) {
      const firstStart = events.findIndex(
        (e) => e.startsWith("start ") && phaseOf(e.slice(6)) === phase,
      );
      const lastEndBefore = events.findLastIndex(
        (e) => e.startsWith("end ") && phaseOf(e.slice(4)) === phase - 1,
      );
      expect(firstStart, `phase ${phase}`).toBeGreaterThan(lastEndBefore);
    }
    expect(events.filter((e) => e.startsWith("start "))).toHaveLength(26);
  });
});
