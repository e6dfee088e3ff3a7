import { cp, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { writeSourceBundle } from "@distributor/engine/testing";
import { isSharedRootState, parseDocument } from "@distributor/state";
import { createLocalBackend } from "@distributor/storage";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { BackendRegistry } from "../../../src/backends/registry.js";
import { type Config, parseConfig } from "../../../src/config/index.js";
import { isPruneError } from "../../../src/errors.js";
import { prune } from "../../../src/maintenance/prune/prune.js";
import type { PruneReport } from "../../../src/maintenance/prune/types.js";
import { run, runSucceeded } from "../../../src/run/run.js";

// Prune across bundle paths: a preserve_relative destination holds one state per bundle path,
// and retention counts whole bundles by when they were published. Real runs publish the
// archive on the real filesystem; each bundle one hour after the one before.

const T0 = Date.UTC(2026, 5, 1);
const HOUR = 3_600_000;

let dir: string;
let source: string;
let dest: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "distributor-prune-bundles-"));
  source = join(dir, "source");
  dest = join(dir, "dest");
});
afterEach(() => rm(dir, { recursive: true, force: true }));

const bundlePath = (index: number) => `days/${String(index).padStart(2, "0")}`;

function config(retention: string, extra = "", pipelines = ""): Config {
  return parseConfig(
    `pipelines:\n  - id: reports\n    source: {backend: local, path: ${source}}\n    destinations:\n      - id: archive\n        backend: local\n        path: ${dest}\n        retention: {prune: {enabled: true, ${retention}}}\n${extra}${pipelines}`,
  );
}

/** Publishes bundles 1..count into the archive, bundle i at T0 + i hours. */
async function archive(cfg: Config, count: number, pipeline = "reports", src = source) {
  for (let index = 1; index <= count; index++) {
    await writeSourceBundle(
      createLocalBackend({ root: src }),
      bundlePath(index),
      { "report.md": `# Day ${index}\n`, "data/n.txt": `${index}\n` },
      { id: `${pipeline}.day`, created: new Date(T0 + index * HOUR) },
    );
    const report = await run({
      config: cfg,
      pipelineIds: [pipeline],
      now: () => new Date(T0 + index * HOUR),
    });
    expect(runSucceeded(report), JSON.stringify(report.actions)).toBe(true);
  }
}

async function listTree(root: string): Promise<string[]> {
  const entries = await readdir(root, { recursive: true, withFileTypes: true });
  return entries.map((entry) => join(entry.parentPath, entry.name).slice(root.length + 1)).sort();
}

const days = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => bundlePath(from + i));

describe("prune across bundle paths", () => {
  it("plans the oldest bundles beyond keep_latest in a dry run and changes nothing", async () => {
    const cfg = config("keep_latest: 10");
    await archive(cfg, 30);
    const before = await listTree(dest);

    const report = await prune({
      config: cfg,
      pipelineId: "reports",
      destinationId: "archive",
      now: () => new Date(T0 + 40 * HOUR),
    });

    expect(report).toMatchObject({
      unit: "bundles",
      checked_count: 30,
      dry_run: true,
      would_change: true,
      state_changed: false,
      deleted_bundles: [],
      deleted_outputs: [],
    });
    expect(report.planned_bundles.map((b) => b.bundle_path)).toEqual(days(1, 20));
    expect(report.preserved_bundles.map((b) => b.bundle_path)).toEqual(days(21, 30).reverse());
    expect(report.planned_bundles[0]).toEqual({
      bundle_path: "days/01",
      published_at: "2026-06-01T01:00:00Z",
      source_id: "reports.day",
      created: "2026-06-01T01:00:00Z",
      output_count: 2,
      removes_state: true,
    });
    expect(report.planned_outputs.slice(0, 2).map((o) => o.path)).toEqual([
      "days/01/data/n.txt",
      "days/01/report.md",
    ]);
    expect(report.planned_outputs).toHaveLength(40);
    expect(await listTree(dest)).toEqual(before);
  });

  it("--apply removes whole bundle paths (outputs, state, directories) and keeps the newest", async () => {
    const cfg = config("keep_latest: 10");
    await archive(cfg, 30);
    await writeFile(join(dest, "days/25/notes.txt"), "mine\n");

    const report = await prune({
      config: cfg,
      pipelineId: "reports",
      destinationId: "archive",
      dryRun: false,
      now: () => new Date(T0 + 40 * HOUR),
    });

    expect(report.deleted_bundles.map((b) => b.bundle_path)).toEqual(days(1, 20));
    expect(report.deleted_outputs).toHaveLength(40);
    expect(report.state_changed).toBe(true);
    expect(report.failed_bundle).toBeUndefined();
    expect(await readdir(join(dest, "days"))).toEqual(
      Array.from({ length: 10 }, (_, i) => String(21 + i)),
    );
    // The kept bundles are untouched, an unmanaged file among them too; no lease is left.
    const tree = await listTree(dest);
    expect(tree.filter((path) => path.endsWith(".distributor.lease"))).toEqual([]);
    expect(await readFile(join(dest, "days/25/notes.txt"), "utf8")).toBe("mine\n");
    const kept = parseDocument(await readFile(join(dest, "days/30/.distributor.json"), "utf8"));
    expect(kept.outputs.map((o) => o.path).sort()).toEqual(["data/n.txt", "report.md"]);

    // Nothing is left to prune.
    const again = await prune({
      config: cfg,
      pipelineId: "reports",
      destinationId: "archive",
      dryRun: false,
      now: () => new Date(T0 + 40 * HOUR),
    });
    expect(again).toMatchObject({ checked_count: 10, planned_bundles: [], state_changed: false });
  });

  it("ranks bundles one run published together by their source's created time", async () => {
    const cfg = config("keep_latest: 2");
    // Written in an order unlike both the paths and the times; one run publishes all five.
    for (const [path, hour] of [
      ["e", 3],
      ["a", 5],
      ["c", 1],
      ["b", 4],
      ["d", 2],
    ] as const) {
      await writeSourceBundle(
        createLocalBackend({ root: source }),
        path,
        { "x.txt": path },
        {
          id: "reports.day",
          created: new Date(T0 + hour * HOUR),
        },
      );
    }
    expect(runSucceeded(await run({ config: cfg, now: () => new Date(T0 + 6 * HOUR) }))).toBe(true);
    const report = await prune({
      config: cfg,
      pipelineId: "reports",
      destinationId: "archive",
      now: () => new Date(T0 + 6 * HOUR),
    });
    expect(report.preserved_bundles.map((b) => b.bundle_path)).toEqual(["a", "b"]);
    expect(report.planned_bundles.map((b) => b.bundle_path)).toEqual(["c", "d", "e"]);
  });

  it("older_than keeps the bundles published within it", async () => {
    const cfg = config("older_than: 5h");
    await archive(cfg, 8);
    const report = await prune({
      config: cfg,
      pipelineId: "reports",
      destinationId: "archive",
      dryRun: false,
      now: () => new Date(T0 + 10 * HOUR),
    });
    // Published at hours 1..8; now is hour 10: bundles of hours 5..8 are younger than 5h.
    expect(report.deleted_bundles.map((b) => b.bundle_path)).toEqual(days(1, 4));
    expect(await readdir(join(dest, "days"))).toEqual(["05", "06", "07", "08"]);
  });

  it("in a shared root, prunes only its own records and leaves the other owner's bundle", async () => {
    const shared = "        state: {mode: shared_root}\n";
    const other = join(dir, "other");
    const cfg = config(
      "keep_latest: 1",
      shared,
      `  - id: html\n    source: {backend: local, path: ${other}}\n    destinations:\n      - id: site\n        backend: local\n        path: ${dest}\n        state: {mode: shared_root}\n        publish: {source: false, html: true}\n        transform: {markdown_to_html: {enabled: true}}\n`,
    );
    await archive(cfg, 3);
    await archive(cfg, 1, "html", other);

    const report = await prune({
      config: cfg,
      pipelineId: "reports",
      destinationId: "archive",
      dryRun: false,
      now: () => new Date(T0 + 10 * HOUR),
    });

    expect(report.deleted_bundles).toEqual([
      expect.objectContaining({ bundle_path: "days/01", removes_state: false }),
      expect.objectContaining({ bundle_path: "days/02", removes_state: true }),
    ]);
    // days/01 keeps the other owner's page and a state that no longer names this owner.
    expect((await listTree(join(dest, "days/01"))).filter((p) => !p.endsWith("/"))).toEqual([
      ".distributor.json",
      "report.html",
    ]);
    const state = parseDocument(await readFile(join(dest, "days/01/.distributor.json"), "utf8"));
    expect(state.outputs.map((o) => o.path)).toEqual(["report.html"]);
    expect(JSON.stringify(state)).not.toContain('"archive"');
    expect(await readdir(join(dest, "days"))).toEqual(["01", "03"]);

    // The other owner's own prune sees only its bundle.
    const theirs = await prune({
      config: cfg,
      pipelineId: "html",
      destinationId: "site",
      now: () => new Date(T0 + 10 * HOUR),
    });
    expect(theirs.checked_count).toBe(0);
  });

  it("leaves bundle states of another owner alone", async () => {
    const cfg = config("keep_latest: 1");
    await archive(cfg, 3);
    // A bundle path another pipeline published, copied into this archive.
    const elsewhere = join(dir, "elsewhere");
    const other = parseConfig(
      `pipelines:\n  - id: other\n    source: {backend: local, path: ${join(dir, "other")}}\n    destinations:\n      - id: site\n        backend: local\n        path: ${elsewhere}\n`,
    );
    await archive(other, 1, "other", join(dir, "other"));
    await cp(join(elsewhere, "days/01"), join(dest, "days/00"), { recursive: true });
    const before = await listTree(join(dest, "days/00"));

    const report = await prune({
      config: cfg,
      pipelineId: "reports",
      destinationId: "archive",
      dryRun: false,
      now: () => new Date(T0 + 10 * HOUR),
    });
    expect(report.checked_count).toBe(3);
    expect(report.deleted_bundles.map((b) => b.bundle_path)).toEqual(["days/01", "days/02"]);
    expect(await listTree(join(dest, "days/00"))).toEqual(before);
    expect(await readdir(join(dest, "days"))).toEqual(["00", "03"]);
  });

  it("refuses to prune anything when a bundle state is invalid", async () => {
    const cfg = config("keep_latest: 1");
    await archive(cfg, 3);
    await writeFile(join(dest, "days/02/.distributor.json"), "{ not state");
    const before = await listTree(dest);

    const failure = await prune({
      config: cfg,
      pipelineId: "reports",
      destinationId: "archive",
      dryRun: false,
      now: () => new Date(T0 + 10 * HOUR),
    }).catch((error: unknown) => error);

    expect(failure).toMatchObject({
      code: "state_invalid",
      message: expect.stringContaining("days/02/.distributor.json"),
    });
    expect(await listTree(dest)).toEqual(before);
  });

  it("a prune stopped after the state write is finished by the next prune", async () => {
    const cfg = config("keep_latest: 1");
    await archive(cfg, 2);
    // The delete of days/01's state fails: its outputs are gone, its state records none.
    const inner = createLocalBackend({ root: dest });
    const failing = new Proxy(inner, {
      get(target, property) {
        if (property === "deletePaths") {
          return async (...args: Parameters<typeof inner.deletePaths>) => {
            if (!args[1].includes(".distributor.json")) return inner.deletePaths(...args);
            throw new Error("injected: delete refused");
          };
        }
        const value = Reflect.get(target, property, target);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const stopped = await prune({
      config: cfg,
      pipelineId: "reports",
      destinationId: "archive",
      dryRun: false,
      now: () => new Date(T0 + 10 * HOUR),
      backends: {
        local: async (location) =>
          location.path === dest ? failing : createLocalBackend({ root: location.path }),
      },
    }).catch((error: unknown) => error);
    if (!isPruneError(stopped)) throw new Error(`expected a PruneError, got ${String(stopped)}`);
    const partial: PruneReport = stopped.report;
    expect(partial.failed_bundle?.bundle_path).toBe("days/01");
    expect(partial.state_changed).toBe(true);
    const left = parseDocument(await readFile(join(dest, "days/01/.distributor.json"), "utf8"));
    expect(left.outputs).toEqual([]);

    const next = await prune({
      config: cfg,
      pipelineId: "reports",
      destinationId: "archive",
      dryRun: false,
      now: () => new Date(T0 + 11 * HOUR),
    });
    expect(next.deleted_bundles.map((b) => b.bundle_path)).toEqual(["days/01"]);
    expect(await readdir(join(dest, "days"))).toEqual(["02"]);
  });

  it("ranks by content time, so bundles the source still holds do not push out the newest", async () => {
    const cfg = config("keep_latest: 2");
    await archive(cfg, 4);
    const prunedOnce = await prune({
      config: cfg,
      pipelineId: "reports",
      destinationId: "archive",
      dryRun: false,
      now: () => new Date(T0 + 10 * HOUR),
    });
    expect(prunedOnce.deleted_bundles.map((b) => b.bundle_path)).toEqual(days(1, 2));
    // The source still holds them: the report says they come back.
    expect(prunedOnce.warnings.map((w) => [w.code, w.bundle_path])).toEqual([
      ["bundle_in_source", "days/01"],
      ["bundle_in_source", "days/02"],
    ]);

    // The source still holds days/01 and days/02: the next run publishes them again.
    const republished = await run({ config: cfg, now: () => new Date(T0 + 20 * HOUR) });
    expect(runSucceeded(republished)).toBe(true);
    expect(republished.actions.filter((a) => a.action === "publish_new")).toHaveLength(2);

    const prunedAgain = await prune({
      config: cfg,
      pipelineId: "reports",
      destinationId: "archive",
      dryRun: false,
      now: () => new Date(T0 + 21 * HOUR),
    });
    // The same (oldest by manifest created) bundles go again; the newest content stays.
    expect(prunedAgain.deleted_bundles.map((b) => b.bundle_path)).toEqual(days(1, 2));
    expect(prunedAgain.deleted_bundles[0]).toMatchObject({
      published_at: "2026-06-01T20:00:00Z",
      created: "2026-06-01T01:00:00Z",
    });
    expect(prunedAgain.preserved_bundles.map((b) => b.bundle_path)).toEqual(days(3, 4).reverse());
    expect(await readdir(join(dest, "days"))).toEqual(["03", "04"]);

    // Once gone from the source too, they stay gone and nothing is warned about.
    await rm(join(source, "days/01"), { recursive: true });
    await rm(join(source, "days/02"), { recursive: true });
    expect(runSucceeded(await run({ config: cfg, now: () => new Date(T0 + 22 * HOUR) }))).toBe(
      true,
    );
    const settled = await prune({
      config: cfg,
      pipelineId: "reports",
      destinationId: "archive",
      now: () => new Date(T0 + 23 * HOUR),
    });
    expect(settled).toMatchObject({ planned_bundles: [], warnings: [], would_change: false });
  });

  it("warns that the source could not be checked, and prunes all the same", async () => {
    const cfg = config("keep_latest: 1");
    await archive(cfg, 2);
    const report = await prune({
      config: cfg,
      pipelineId: "reports",
      destinationId: "archive",
      dryRun: false,
      now: () => new Date(T0 + 10 * HOUR),
      backends: {
        local: async (location) => {
          if (location.path !== dest) throw new Error("injected: source unreachable");
          return createLocalBackend({ root: dest });
        },
      },
    });
    expect(report.deleted_bundles.map((b) => b.bundle_path)).toEqual(["days/01"]);
    expect(report.warnings.map((w) => w.code)).toEqual(["source_unchecked"]);
  });

  it("older_than ages bundles by their manifest created, not by when they were published", async () => {
    const cfg = config("older_than: 5h");
    for (let index = 1; index <= 8; index++) {
      await writeSourceBundle(
        createLocalBackend({ root: source }),
        bundlePath(index),
        { "x.txt": `${index}\n` },
        { id: "reports.day", created: new Date(T0 + index * HOUR) },
      );
    }
    // One run publishes all eight at hour 9 (a backfill).
    expect(runSucceeded(await run({ config: cfg, now: () => new Date(T0 + 9 * HOUR) }))).toBe(true);
    const report = await prune({
      config: cfg,
      pipelineId: "reports",
      destinationId: "archive",
      dryRun: false,
      now: () => new Date(T0 + 10 * HOUR),
    });
    expect(report.deleted_bundles.map((b) => b.bundle_path)).toEqual(days(1, 4));
    expect(await readdir(join(dest, "days"))).toEqual(["05", "06", "07", "08"]);
  });
});

/** The local destination, with `hook` run before (`before`) or after a call the filter picks. */
function intercepted(
  pick: (method: string, path: unknown) => boolean,
  hook: () => Promise<void>,
  when: "before" | "after",
): BackendRegistry {
  const inner = createLocalBackend({ root: dest });
  let fired = false;
  const wrapped = new Proxy(inner, {
    get(target, property) {
      const value = Reflect.get(target, property, target);
      if (typeof value !== "function") return value;
      return async (...args: unknown[]) => {
        const fire = !fired && pick(String(property), args[0]);
        if (fire) fired = true;
        if (fire && when === "before") await hook();
        const result = await value.apply(target, args);
        if (fire && when === "after") await hook();
        return result;
      };
    },
  });
  return {
    local: async (location) =>
      location.path === dest ? wrapped : createLocalBackend({ root: location.path }),
  };
}

describe("prune across bundle paths, with something happening meanwhile", () => {
  const applyPrune = (cfg: Config, backends: BackendRegistry) =>
    prune({
      config: cfg,
      pipelineId: "reports",
      destinationId: "archive",
      dryRun: false,
      now: () => new Date(T0 + 10 * HOUR),
      backends,
    });

  it("never deletes unfenced an output that was missing when its version was read", async () => {
    const cfg = config("keep_latest: 1");
    await archive(cfg, 2);
    await rm(join(dest, "days/01/report.md"));
    // Once the state no longer records it, another run (one that took over a stalled prune's
    // lease) writes days/01/report.md again: not this prune's to delete.
    const backends = intercepted(
      (method, path) => method === "writeFile" && path === "days/01/.distributor.json",
      () => writeFile(join(dest, "days/01/report.md"), "# theirs\n"),
      "after",
    );
    const report = await applyPrune(cfg, backends);
    expect(report.deleted_bundles.map((b) => b.bundle_path)).toEqual(["days/01"]);
    expect(await readFile(join(dest, "days/01/report.md"), "utf8")).toBe("# theirs\n");
    await expect(readFile(join(dest, "days/01/data/n.txt"), "utf8")).rejects.toThrow();
  });

  it("preserves a bundle published again between planning and its lease", async () => {
    const cfg = config("keep_latest: 1");
    await archive(cfg, 2);
    const republish = async () => {
      await writeSourceBundle(
        createLocalBackend({ root: source }),
        bundlePath(1),
        { "report.md": "# Day 1 again\n", "data/n.txt": "1\n" },
        { id: "reports.day", created: new Date(T0 + 5 * HOUR) },
      );
      const again = await run({ config: cfg, now: () => new Date(T0 + 5 * HOUR) });
      expect(runSucceeded(again), JSON.stringify(again.actions)).toBe(true);
    };
    const backends = intercepted(
      (method, path) => method === "writeFile" && path === "days/01/.distributor.lease.json",
      republish,
      "before",
    );
    const report = await applyPrune(cfg, backends);
    expect(report.planned_bundles.map((b) => b.bundle_path)).toEqual(["days/01"]);
    expect(report.deleted_bundles).toEqual([]);
    expect(report.deleted_outputs).toEqual([]);
    expect(report.preserved_bundles.map((b) => b.bundle_path)).toEqual(["days/02", "days/01"]);
    expect(await readFile(join(dest, "days/01/report.md"), "utf8")).toBe("# Day 1 again\n");
    const kept = parseDocument(await readFile(join(dest, "days/01/.distributor.json"), "utf8"));
    if (isSharedRootState(kept)) throw new Error("expected a single-owner state");
    expect(kept.source.manifest.created.toISOString()).toBe("2026-06-01T05:00:00.000Z");
  });

  it("deletes and reports the outputs the state records under the lease, not the planned ones", async () => {
    const cfg = config("keep_latest: 1");
    await archive(cfg, 2);
    // Between planning and the lease, the state of days/01 comes to record one more output.
    const addRecord = async () => {
      const file = join(dest, "days/01/.distributor.json");
      const raw = JSON.parse(await readFile(file, "utf8"));
      const record = raw.outputs.find((o: { path: string }) => o.path === "data/n.txt");
      raw.outputs.push({ ...record, path: "data/m.txt" });
      await writeFile(file, JSON.stringify(raw, null, 2));
      await writeFile(join(dest, "days/01/data/m.txt"), "1\n");
    };
    const backends = intercepted(
      (method, path) => method === "writeFile" && path === "days/01/.distributor.lease.json",
      addRecord,
      "before",
    );
    const report = await applyPrune(cfg, backends);
    expect(report.planned_outputs.map((o) => o.path)).toEqual([
      "days/01/data/n.txt",
      "days/01/report.md",
    ]);
    expect(report.deleted_outputs.map((o) => o.path).sort()).toEqual([
      "days/01/data/m.txt",
      "days/01/data/n.txt",
      "days/01/report.md",
    ]);
    expect(report.deleted_bundles).toMatchObject([{ bundle_path: "days/01", output_count: 3 }]);
    expect(await readdir(join(dest, "days"))).toEqual(["02"]);
  });
});
