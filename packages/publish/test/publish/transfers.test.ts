import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLocalBackend, LEASE_FILE_NAME, STATE_FILE_NAME } from "@distributor/storage";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/index.js";
import { run, runSucceeded } from "../../src/workflows/run.js";
import { aroundWrites, writeSourceBundle } from "./fixtures.js";

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
