import { createHash } from "node:crypto";
import { mkdtemp, readdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { writeSourceBundle } from "@distributor/engine/testing";
import { parseDocument } from "@distributor/state";
import { createLocalBackend, isTempFileName, LEASE_FILE_NAME } from "@distributor/storage";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { BackendRegistry } from "../../src/backends/registry.js";
import { parseConfig } from "../../src/config/index.js";
import { run, runSucceeded } from "../../src/run/run.js";
import { aroundWrites } from "../support/registries.js";

// A compare-and-swap of the state that finds another writer's commit plans again instead of
// overwriting it. (The fault model itself, every fault at every mutation, is test/faults/.)

/**
 * A registry whose backend for `destRoot` runs `before(path)` ahead of every `writeFile`, to
 * slip something in between planning and a write.
 */
function beforeWrites(destRoot: string, before: (path: string) => Promise<void>): BackendRegistry {
  return aroundWrites(destRoot, async (path, write) => {
    await before(path);
    return write();
  });
}

async function tree(root: string): Promise<Map<string, string>> {
  const files = new Map<string, string>();
  const visit = async (dir: string) => {
    for (const entry of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) await visit(path);
      else files.set(relative(root, path), await readFile(path, "utf8"));
    }
  };
  await visit(root);
  return files;
}

const sha = (text: string) => `sha256:${createHash("sha256").update(text).digest("hex")}`;

interface Scenario {
  name: string;
  shared: boolean;
  merge: boolean;
  /** Publishes what must be there before the faulty run. */
  before: (ctx: Context) => Promise<void>;
  /** The new version of our source. */
  files: Record<string, string>;
  /** Every file the destination must hold in the end, besides the state. */
  expected: Record<string, string>;
}

interface Context {
  dir: string;
  src: string;
  other: string;
  dest: string;
  config: ReturnType<typeof parseConfig>;
}

const V1 = { "a.md": "# A one\n", "b.txt": "b one\n", "docs/c.txt": "c one\n" };
const V2 = { "a.md": "# A two\n", "b.txt": "b one\n", "d.txt": "d two\n" };

async function publishVersion(
  ctx: Context,
  files: Record<string, string>,
  hour: number,
  id = "reports.example",
) {
  await rm(ctx.src, { recursive: true, force: true });
  await writeSourceBundle(createLocalBackend({ root: ctx.src }), "", files, {
    id,
    created: new Date(Date.UTC(2026, 5, 4, hour)),
  });
}

const SCENARIOS: Scenario[] = [
  {
    name: "a first publication",
    shared: false,
    merge: false,
    before: async () => {},
    files: V1,
    expected: V1,
  },
  {
    name: "a replacement",
    shared: false,
    merge: false,
    before: async (ctx) => {
      await publishVersion(ctx, V1, 1);
      expect(runSucceeded(await run({ config: ctx.config }))).toBe(true);
    },
    files: V2,
    expected: V2,
  },
  {
    name: "a merge",
    shared: false,
    merge: true,
    before: async (ctx) => {
      await publishVersion(ctx, V1, 1);
      expect(runSucceeded(await run({ config: ctx.config }))).toBe(true);
    },
    files: V2,
    expected: { ...V1, ...V2 },
  },
  {
    name: "a shared-root replacement beside another owner",
    shared: true,
    merge: false,
    before: async (ctx) => {
      await writeSourceBundle(
        createLocalBackend({ root: ctx.other }),
        "",
        { "other.txt": "theirs\n" },
        { id: "other.source" },
      );
      await publishVersion(ctx, V1, 1);
      expect(runSucceeded(await run({ config: ctx.config }))).toBe(true);
    },
    files: V2,
    expected: { ...V2, "other.txt": "theirs\n" },
  },
];

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "distributor-faults-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function setup(scenario: Scenario): Promise<Context> {
  const base = await mkdtemp(join(dir, "case-"));
  const ctx = {
    dir: base,
    src: join(base, "src"),
    other: join(base, "other"),
    dest: join(base, "dest"),
  } as Context;
  const state = scenario.shared ? "\n        state: {mode: shared_root}" : "";
  const reconciliation = scenario.merge ? "\n        reconciliation: {mode: merge}" : "";
  const destination = (id: string) =>
    `    destinations:\n      - id: ${id}\n        backend: local\n        path: ${ctx.dest}${state}${reconciliation}\n`;
  const other = scenario.shared
    ? `  - id: other\n    source: {backend: local, path: ${ctx.other}}\n${destination("site")}`
    : "";
  ctx.config = parseConfig(
    `pipelines:\n${other}  - id: reports\n    source: {backend: local, path: ${ctx.src}}\n${destination("archive")}`,
  );
  await scenario.before(ctx);
  await publishVersion(ctx, scenario.files, 2);
  return ctx;
}

async function expectExactlyNewVersion(ctx: Context, scenario: Scenario) {
  const files = await tree(ctx.dest);
  const state = parseDocument(files.get(".distributor.json") ?? "");
  files.delete(".distributor.json");
  expect(Object.fromEntries(files)).toEqual(scenario.expected);
  const recorded = Object.fromEntries(state.outputs.map((o) => [o.path, o.sha256]));
  expect(recorded).toEqual(
    Object.fromEntries(Object.entries(scenario.expected).map(([path, text]) => [path, sha(text)])),
  );
  for (const path of files.keys()) {
    expect(isTempFileName(path.slice(path.lastIndexOf("/") + 1))).toBe(false);
    expect(path.endsWith(LEASE_FILE_NAME)).toBe(false);
  }
}

describe("a state changed between planning and commit", () => {
  it("a state changed by another writer after planning makes the run plan again, not overwrite", async () => {
    const scenario = SCENARIOS[1] as Scenario;
    const ctx = await setup(scenario);
    const statePath = join(ctx.dest, ".distributor.json");
    let swapped = false;
    const backends = beforeWrites(ctx.dest, async (path) => {
      if (path !== ".distributor.json" || swapped) return;
      // Another writer commits between our planning and our commit: the state now says it was
      // created in 2020, which a blind overwrite would lose.
      swapped = true;
      const text = await readFile(statePath, "utf8");
      const edited = text.replace(/"created_at":"[^"]+"/, '"created_at":"2020-01-01T00:00:00Z"');
      expect(edited).not.toBe(text);
      await writeFile(`${statePath}.new`, edited);
      await rename(`${statePath}.new`, statePath);
    });
    const plans: string[] = [];
    const report = await run({
      config: ctx.config,
      pipelineIds: ["reports"],
      backends,
      onEvent: (event) => {
        if (event.type === "plan") plans.push(event.action.action ?? "");
      },
    });
    expect(swapped).toBe(true);
    expect(runSucceeded(report), JSON.stringify(report.actions)).toBe(true);
    // Planned twice: the first commit found another version and was not made.
    expect(plans).toEqual(["replace_older", "replace_older"]);
    const state = JSON.parse(await readFile(statePath, "utf8"));
    expect(state.created_at).toBe("2020-01-01T00:00:00Z");
    await expectExactlyNewVersion(ctx, scenario);
  });
});
