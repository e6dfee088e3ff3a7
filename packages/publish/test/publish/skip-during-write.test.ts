import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { writeSourceBundle } from "@distributor/engine/testing";
import { createLocalBackend } from "@distributor/storage";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { BackendRegistry } from "../../src/backends/registry.js";
import { parseConfig } from "../../src/config/index.js";
import { run, runSucceeded } from "../../src/run/run.js";
import { aroundWrites, type BackendCall, wrappingDestination } from "../support/registries.js";

// A run whose plan is a skip reads the state alone (docs/design/bundles.md). A writer may be part-way through
// replacing the very outputs that state records: then the state does not describe the bytes, and
// a skip reported at that moment would be a success the destination contradicts. The writer
// marks the state before its first write (`replacing`), so a writer of the same records is seen
// in the one read a skip makes, and the skip waits for its lease instead (docs/design/commit-protocol.md).

const V1 = { "a.txt": "a one\n", "b.txt": "b one\n" };
const V2 = { "a.txt": "a two\n", "b.txt": "b two\n" };

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "distributor-skip-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A registry whose backend for `dest` runs `after(path)` once each output write is done. */
function afterWrites(dest: string, after: (path: string) => Promise<void>): BackendRegistry {
  return aroundWrites(dest, async (path, write) => {
    const written = await write();
    await after(path);
    return written;
  });
}

async function source(name: string, files: Record<string, string>, hour: number, id: string) {
  const path = join(dir, name);
  await writeSourceBundle(createLocalBackend({ root: path }), "", files, {
    id,
    created: new Date(Date.UTC(2026, 5, 4, hour)),
  });
  return path;
}

function config(dest: string, pipelines: Array<{ id: string; src: string }>, shared: boolean) {
  const state = shared ? "\n        state: {mode: shared_root}" : "";
  return parseConfig(
    `pipelines:\n${pipelines
      .map(
        ({ id, src }) =>
          `  - id: ${id}\n    source: {backend: local, path: ${src}}\n    destinations:\n      - id: site\n        backend: local\n        path: ${dest}${state}\n`,
      )
      .join("")}`,
  );
}

describe("a skip while another run replaces outputs in place", () => {
  it("is not reported while a run of the same owner holds the lease part-way through", async () => {
    const dest = join(dir, "dest");
    const v1 = await source("v1", V1, 1, "reports.example");
    const v2 = await source("v2", V2, 2, "reports.example");
    expect(
      runSucceeded(await run({ config: config(dest, [{ id: "reports", src: v1 }], false) })),
    ).toBe(true);

    let concurrent: Awaited<ReturnType<typeof run>> | undefined;
    const backends = afterWrites(dest, async (path) => {
      if (concurrent !== undefined || !(path in V1)) return;
      // One output already holds V2's bytes while the state still records V1's: a run of V1
      // must not say the destination holds V1.
      expect(await readFile(join(dest, path), "utf8")).toBe(V2[path as keyof typeof V2]);
      concurrent = await run({ config: config(dest, [{ id: "reports", src: v1 }], false) });
    });
    const writer = await run({
      config: config(dest, [{ id: "reports", src: v2 }], false),
      backends,
    });
    expect(runSucceeded(writer)).toBe(true);

    expect(concurrent).toBeDefined();
    const [action] = concurrent?.actions ?? [];
    expect(action?.action).not.toBe("skip_same");
    expect(runSucceeded(concurrent as NonNullable<typeof concurrent>)).toBe(false);
    expect(action?.error?.code).toBe("lease_held");
  });

  it("stands beside another owner's writer in a shared root, which never touches its records", async () => {
    const dest = join(dir, "dest");
    const v1 = await source("v1", V1, 1, "reports.example");
    const v2 = await source("v2", V2, 2, "reports.example");
    const theirs = await source("theirs", { "other.txt": "theirs\n" }, 1, "other.source");
    const both = (src: string) =>
      config(
        dest,
        [
          { id: "other", src: theirs },
          { id: "reports", src },
        ],
        true,
      );
    expect(runSucceeded(await run({ config: both(v1) }))).toBe(true);

    let concurrent: Awaited<ReturnType<typeof run>> | undefined;
    const backends = afterWrites(dest, async (path) => {
      if (concurrent !== undefined || !(path in V1)) return;
      concurrent = await run({ config: both(v1), pipelineIds: ["other"] });
    });
    const writer = await run({ config: both(v2), pipelineIds: ["reports"], backends });
    expect(runSucceeded(writer)).toBe(true);

    expect(concurrent).toBeDefined();
    expect(concurrent?.actions.map((a) => [a.pipeline_id, a.action])).toEqual([
      ["other", "skip_same"],
    ]);
    expect(runSucceeded(concurrent as NonNullable<typeof concurrent>)).toBe(true);
  });
});

/** A registry whose backend for `dest` records every call made on it (method and first argument). */
function counting(dest: string, calls: string[]): BackendRegistry {
  return wrappingDestination(dest, (name, call) => {
    if (name === "close") return call;
    return ((...args: never[]) => {
      calls.push(`${name}(${String(args[0])})`);
      return call(...args);
    }) as BackendCall;
  });
}

describe("a skip reads the state alone", () => {
  it("makes one read per destination bundle path, of the state file", async () => {
    const dest = join(dir, "dest");
    const v1 = await source("v1", V1, 1, "reports.example");
    const cfg = config(dest, [{ id: "reports", src: v1 }], false);
    expect(runSucceeded(await run({ config: cfg }))).toBe(true);
    const calls: string[] = [];
    const report = await run({ config: cfg, backends: counting(dest, calls) });
    expect(report.actions.map((a) => a.action)).toEqual(["skip_same"]);
    // Read a chunk at a time, as the local backend can (`openVersionedReader`).
    expect(calls).toEqual(["openVersionedReader(.distributor.json)"]);
  });

  it("marks the state while a replacement writes, and leaves no marker once it committed", async () => {
    const dest = join(dir, "dest");
    const v1 = await source("v1", V1, 1, "reports.example");
    const v2 = await source("v2", V2, 2, "reports.example");
    expect(
      runSucceeded(await run({ config: config(dest, [{ id: "reports", src: v1 }], false) })),
    ).toBe(true);
    let marked: string | undefined;
    const backends = afterWrites(dest, async (path) => {
      if (marked === undefined && path in V1) {
        marked = await readFile(join(dest, ".distributor.json"), "utf8");
      }
    });
    const writer = await run({
      config: config(dest, [{ id: "reports", src: v2 }], false),
      backends,
    });
    expect(runSucceeded(writer)).toBe(true);
    // While its outputs were being replaced, the state said so; once committed, it does not.
    expect(JSON.parse(marked ?? "{}").replacing?.run_id).toEqual(expect.any(String));
    const committed = JSON.parse(await readFile(join(dest, ".distributor.json"), "utf8"));
    expect(committed.replacing).toBeUndefined();
    expect(committed.source.manifest.id).toBe("reports.example");
  });
});

describe("a marker whose run's lease went without a recovery", () => {
  it("has every record it covers looked at before anything is decided from them", async () => {
    const dest = join(dir, "dest");
    const v1 = await source("v1", V1, 1, "reports.example");
    const cfg = config(dest, [{ id: "reports", src: v1 }], false);
    expect(runSucceeded(await run({ config: cfg }))).toBe(true);
    // A replacement marked the state, changed b.txt in place and died; its lease was then
    // removed by hand, so no journal says what it changed.
    const statePath = join(dest, ".distributor.json");
    const state = JSON.parse(await readFile(statePath, "utf8"));
    const { outputs, ...rest } = state;
    const marked = {
      ...rest,
      replacing: { run_id: "gone-run", started_at: "2026-06-04T03:00:00Z" },
      outputs,
    };
    await writeFile(statePath, `${JSON.stringify(marked)}\n`);
    await writeFile(join(dest, "b.txt"), "b half-replaced\n");

    const report = await run({ config: cfg });
    expect(runSucceeded(report)).toBe(true);
    // b.txt no longer held its record's bytes: the file and its record went, which left the
    // recorded source incomplete, so the same run completed it from the source: b.txt is back.
    expect(report.actions.map((a) => a.action)).toEqual(["complete"]);
    expect(report.actions[0]?.outputs.map((o) => o.path)).toEqual(["b.txt"]);
    const after = JSON.parse(await readFile(statePath, "utf8"));
    expect(after.replacing).toBeUndefined();
    expect(after.outputs.map((o: { path: string }) => o.path)).toEqual(["a.txt", "b.txt"]);
    expect(state.outputs.map((o: { path: string }) => o.path)).toEqual(["a.txt", "b.txt"]);
    expect(await readFile(join(dest, "b.txt"), "utf8")).toBe(V1["b.txt"]);
    expect(await readFile(join(dest, "a.txt"), "utf8")).toBe(V1["a.txt"]);
    // Then a skip.
    const again = await run({ config: cfg });
    expect(again.actions.map((a) => a.action)).toEqual(["skip_same"]);
  });
});
