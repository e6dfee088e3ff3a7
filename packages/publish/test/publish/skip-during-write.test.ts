import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLocalBackend } from "@distributor/storage";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/index.js";
import { run, runSucceeded } from "../../src/workflows/run.js";
import type { BackendRegistry } from "../../src/workflows/shared.js";
import { writeSourceBundle } from "./fixtures.js";

// A run whose plan is a skip reads the state without the lease. A writer may be part-way through
// replacing the very outputs that state records: then the state does not describe the bytes, and
// a skip reported at that moment would be a success the destination contradicts. The lease is
// read after the state, so a writer of the same records is seen (SPEC §5).

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
  return {
    local: async (location) => {
      const backend = createLocalBackend({ root: location.path });
      if (location.path !== dest) return backend;
      return new Proxy(backend, {
        get(target, property) {
          const value = Reflect.get(target, property, target);
          if (property !== "writeFile") {
            return typeof value === "function" ? value.bind(target) : value;
          }
          return async (path: string, data: never, options: never) => {
            const written = await target.writeFile(path, data, options);
            await after(path);
            return written;
          };
        },
      });
    },
  };
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
