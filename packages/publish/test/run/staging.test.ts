import { mkdtemp, readdir, readlink, rm, symlink, unlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { memoryStores, writeSourceBundle } from "@distributor/engine/testing";
import { createLocalBackend } from "@distributor/storage";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type Config, parseConfig } from "../../src/config/index.js";
import { adoptOutputs } from "../../src/maintenance/adopt.js";
import { promote } from "../../src/maintenance/promote.js";
import { rollback } from "../../src/maintenance/rollback.js";
import { applyPlan } from "../../src/plan-file/apply.js";
import type { SavedPlan } from "../../src/plan-file/saved-plan.js";
import { planRun } from "../../src/run/plan-run.js";
import { run, stage } from "../../src/run/run.js";
import type { RunEvent } from "../../src/run/types.js";
import { registryFor, wrappingDestination } from "../support/registries.js";

// Staged releases through the library: retention never removes a staged release unless
// `releases.keep_staged` says so, a run of a staged source that changed since publishes it anew
// (warning `promotion_refused`) and staging it again stages it afresh, staging needs `layout:
// releases`, and `stage` emits `run`'s events.

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "distributor-staging-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const dest = () => join(dir, "www");

async function configFor(version: number, releases: string, layout = "releases"): Promise<Config> {
  const source = join(dir, `v${version}`);
  await writeSourceBundle(
    createLocalBackend({ root: source }),
    "",
    { "index.html": `v${version}\n` },
    { id: "site", created: new Date(Date.UTC(2026, 5, version)) },
  );
  return parseConfig(
    `pipelines:\n  - id: site\n    source: {backend: local, path: ${source}}\n    destinations:\n      - id: www\n        backend: local\n        path: ${dest()}\n        path_mapping: {mode: fixed}\n        layout: ${layout}\n${layout === "releases" ? `        releases: ${releases}\n` : ""}`,
  );
}

const backends = () => registryFor("local", memoryStores(), dest());
const committed = async () =>
  (await readdir(join(dest(), "releases")))
    .filter(
      (name) =>
        name.endsWith(".json") &&
        !name.includes(".files.") &&
        !name.includes(".staging.") &&
        !name.includes(".live."),
    )
    .map((name) => name.slice(0, -".json".length))
    .sort();
const live = async () => (await readlink(join(dest(), "current"))).slice("releases/".length);

describe("staged releases", () => {
  it("of a source staged again are staged afresh when the staged files changed since", async () => {
    await run({ config: await configFor(1, "{keep: 3}"), backends: backends() });
    const config = await configFor(2, "{keep: 3}");
    const first = await stage({ config, backends: backends() });
    const id = first.actions[0]?.release_id as string;
    // What a power cut under fsync: false can leave of a staged file: nothing.
    await writeFile(join(dest(), "releases", id, "index.html"), "");
    const again = await stage({ config, backends: backends() });
    expect(again.actions[0]?.status).toBe("staged");
    const fresh = again.actions[0]?.release_id as string;
    expect(fresh).not.toBe(id);
    const unchanged = await stage({ config, backends: backends() });
    expect(unchanged.actions[0]?.release_id).toBe(fresh);
  });

  it("are kept by retention whatever releases.keep says, by default", async () => {
    const first = await run({ config: await configFor(1, "{keep: 1}"), backends: backends() });
    expect(first.actions[0]?.status).toBe("published");
    const staged: string[] = [];
    for (const version of [2, 3, 4]) {
      const report = await stage({
        config: await configFor(version, "{keep: 1}"),
        backends: backends(),
      });
      expect(report.actions[0]?.status).toBe("staged");
      staged.push(report.actions[0]?.release_id as string);
    }
    expect(await committed()).toEqual([await live(), ...staged]);
  });

  it("are bounded by releases.keep_staged, the newest kept", async () => {
    await run({ config: await configFor(1, "{keep: 1, keep_staged: 1}"), backends: backends() });
    const staged: string[] = [];
    for (const version of [2, 3, 4]) {
      const report = await stage({
        config: await configFor(version, "{keep: 1, keep_staged: 1}"),
        backends: backends(),
      });
      staged.push(report.actions[0]?.release_id as string);
    }
    expect(await committed()).toEqual([await live(), staged[2]]);
  });

  it("are published anew by a run when they changed since they were staged", async () => {
    await run({ config: await configFor(1, "{keep: 3}"), backends: backends() });
    const config = await configFor(2, "{keep: 3}");
    const events: RunEvent["type"][] = [];
    const report = await stage({
      config,
      backends: backends(),
      onEvent: (e) => events.push(e.type),
    });
    expect(events).toEqual(expect.arrayContaining(["pipeline_start", "plan", "destination_done"]));
    const id = report.actions[0]?.release_id as string;
    await writeFile(join(dest(), "releases", id, "index.html"), "edited\n");
    const again = await run({ config, backends: backends() });
    const [action] = again.actions;
    expect(action?.error).toBeNull();
    expect(action?.status).toBe("published");
    expect(action?.warnings.map((warning) => warning.code)).toEqual(["promotion_refused"]);
    expect(action?.warnings[0]?.paths).toEqual(["index.html"]);
    expect(await live()).not.toBe(id);
    await expect(
      promote({ config, pipelineId: "site", destinationId: "www", to: id, backends: backends() }),
    ).rejects.toMatchObject({ code: "not_staged" });
  });

  it("are reported by a dry run as the real run would treat them, nothing changed", async () => {
    await run({ config: await configFor(1, "{keep: 3}"), backends: backends() });
    const before = await live();
    const config = await configFor(2, "{keep: 3}");
    const id = (await stage({ config, backends: backends() })).actions[0]?.release_id as string;
    const dry = await run({ config, backends: backends(), dryRun: true });
    expect(dry.actions[0]).toMatchObject({
      status: "promoted",
      action: "skip_same",
      release_id: id,
    });
    expect(await live()).toBe(before);
    const real = await run({ config, backends: backends() });
    expect(real.actions[0]).toMatchObject({ status: "promoted", release_id: id });
    expect(await live()).toBe(id);
    // A staged release edited since: the dry run, like the run, publishes the source afresh.
    const config3 = await configFor(3, "{keep: 3}");
    const id3 = (await stage({ config: config3, backends: backends() })).actions[0]
      ?.release_id as string;
    await writeFile(join(dest(), "releases", id3, "index.html"), "edited\n");
    const dry3 = await run({ config: config3, backends: backends(), dryRun: true });
    expect(dry3.actions[0]?.status).toBe("planned");
    expect(dry3.actions[0]?.warnings.map((warning) => warning.code)).toEqual(["promotion_refused"]);
  });

  it("need layout: releases", async () => {
    const report = await stage({
      config: await configFor(1, "", "in_place"),
      backends: backends(),
    });
    expect(report.actions[0]).toMatchObject({
      status: "failed",
      error: { code: "unsupported_layout" },
    });
    await expect(readdir(dest())).rejects.toThrow();
  });
});

describe("a staged release overtaken by a live one", () => {
  it("is not committed, and staging the source again stages it", async () => {
    await run({ config: await configFor(1, "{keep: 3}"), backends: backends() });
    const config = await configFor(2, "{keep: 3}");
    // Its id older than the live release's: as if a publication went live while it waited.
    const late = await stage({
      config,
      backends: backends(),
      now: () => new Date(Date.UTC(2020, 0, 1)),
    });
    expect(late.actions[0]?.status).toBe("failed");
    expect(late.actions[0]?.error?.message).toContain("nothing was staged");
    expect(await committed()).toEqual([await live()]);
    const again = await stage({ config, backends: backends() });
    expect(again.actions[0]?.status).toBe("staged");
    expect(await committed()).toEqual([await live(), again.actions[0]?.release_id]);
    // What the overtaken run left (its directory and staging state) went with that preparation.
    const left = late.actions[0]?.error?.message.match(/release (\S+) was being staged/)?.[1];
    expect(await readdir(join(dest(), "releases"))).not.toContain(left);
    expect(await readdir(join(dest(), "releases"))).not.toContain(`${left}.staging.json`);
  });
});

describe("a saved plan for a promote: manual destination", () => {
  it("is applied as a staged release, current left as it was", async () => {
    await run({ config: await configFor(1, "{keep: 3}"), backends: backends() });
    const before = await live();
    const config = await configFor(2, "{keep: 3, promote: manual}");
    const { plan } = await planRun({ config, backends: backends() });
    expect(plan).not.toBeNull();
    const applied = await applyPlan({ plan: plan as SavedPlan, config, backends: backends() });
    const [action] = applied.actions;
    expect(action?.status).toBe("staged");
    expect(await live()).toBe(before);
    expect(await committed()).toEqual([before, action?.release_id]);
  });
});

describe("a saved plan of a staged source", () => {
  it("is planned and applied as written, the staged release not promoted", async () => {
    await run({ config: await configFor(1, "{keep: 3}"), backends: backends() });
    const before = await live();
    const config = await configFor(2, "{keep: 3}");
    const id = (await stage({ config, backends: backends() })).actions[0]?.release_id as string;
    const { report, plan } = await planRun({ config, backends: backends() });
    expect(report.actions[0]?.status).toBe("planned");
    expect(report.actions[0]?.release_id).toBeNull();
    expect(plan).not.toBeNull();
    expect(await live()).toBe(before);
    const applied = await applyPlan({ plan: plan as SavedPlan, config, backends: backends() });
    const [action] = applied.actions;
    expect(action?.status).toBe("published");
    expect(await live()).not.toBe(id);
    expect(await live()).not.toBe(before);
    expect(await committed()).toEqual([before, id, await live()].sort());
  });
});

describe("staging on a destination that never went live", () => {
  it("keeps every staged release (keep_staged unset), whatever releases.keep says", async () => {
    const staged: string[] = [];
    for (const version of [1, 2, 3, 4]) {
      const report = await stage({
        config: await configFor(version, "{keep: 3}"),
        backends: backends(),
      });
      expect(report.actions[0]?.status).toBe("staged");
      staged.push(report.actions[0]?.release_id as string);
    }
    expect(await committed()).toEqual(staged);
  });
});

describe("reconcile-state --rebuild with a staged release", () => {
  const rebuild = (config: Config) =>
    adoptOutputs({
      config,
      pipelineId: "site",
      destinationId: "www",
      mode: "rebuild",
      backends: backends(),
    });
  const corrupt = () => writeFile(join(dest(), ".distributor.json"), "{not a state");

  it("refuses where there is no state, naming what to do", async () => {
    await run({ config: await configFor(1, "{keep: 3}"), backends: backends() });
    const config = await configFor(2, "{keep: 3}");
    await stage({ config, backends: backends() });
    await rm(join(dest(), ".distributor.json"));
    await expect(rebuild(config)).rejects.toMatchObject({
      code: "state_missing",
      message: expect.stringContaining("distributor rollback --to <id> --config"),
    });
  });

  it("with current missing, restores the newest release that went live, or refuses to guess", async () => {
    await run({ config: await configFor(1, "{keep: 3}"), backends: backends() });
    const before = await live();
    const config = await configFor(2, "{keep: 3}");
    await stage({ config, backends: backends() });
    await corrupt();
    await unlink(join(dest(), "current"));
    // Its live record says which release went live: that one, never the staged one.
    const report = await rebuild(config);
    expect(report.bundles[0]?.restored_release).toBe(before);
    expect(await live()).toBe(before);
    // Without live records (releases published before they were kept) it cannot tell: refused.
    await corrupt();
    await unlink(join(dest(), "current"));
    await rm(join(dest(), "releases", `${before}.live.json`));
    await expect(rebuild(config)).rejects.toMatchObject({ code: "live_release_unknown" });
    await expect(readlink(join(dest(), "current"))).rejects.toThrow();
  });

  it("with current dangling, restores a release no newer than the one it named", async () => {
    await run({ config: await configFor(1, "{keep: 3}"), backends: backends() });
    const first = await live();
    await run({ config: await configFor(2, "{keep: 3}"), backends: backends() });
    const second = await live();
    const config = await configFor(3, "{keep: 3}");
    const staged = (await stage({ config, backends: backends() })).actions[0]?.release_id;
    expect(staged).toBeDefined();
    await corrupt();
    await rm(join(dest(), "releases", second), { recursive: true });
    await rm(join(dest(), "releases", `${second}.json`));
    await unlink(join(dest(), "current"));
    await symlink(`releases/${second}`, join(dest(), "current"));
    const report = await rebuild(config);
    expect(report.bundles[0]?.restored_release).toBe(first);
    expect(await live()).toBe(first);
  });
});

describe("a staging run whose retention fails", () => {
  it("says the release is staged, not live", async () => {
    await run({ config: await configFor(1, "{keep: 1, keep_staged: 1}"), backends: backends() });
    const before = await live();
    await stage({ config: await configFor(2, "{keep: 1, keep_staged: 1}"), backends: backends() });
    const failing = wrappingDestination(dest(), (name, call) =>
      name === "deletePrefix"
        ? async () => {
            throw new Error("disk says no");
          }
        : call,
    );
    const report = await stage({
      config: await configFor(3, "{keep: 1, keep_staged: 1}"),
      backends: failing,
    });
    const [action] = report.actions;
    expect(action?.status).toBe("staged");
    const warning = action?.warnings.find((w) => w.code === "retention_failed");
    expect(warning?.message).toContain("is staged");
    expect(warning?.message).not.toContain("live");
    expect(await live()).toBe(before);
  });
});

describe("a promotion interrupted once its state is committed", () => {
  it("finishes the switch and says so", async () => {
    await run({ config: await configFor(1, "{keep: 3}"), backends: backends() });
    const config = await configFor(2, "{keep: 3}");
    const id = (await stage({ config, backends: backends() })).actions[0]?.release_id as string;
    const controller = new AbortController();
    const interrupting = wrappingDestination(dest(), (name, call) => {
      if (name !== "writeFile") return call;
      const write = call as (...args: unknown[]) => Promise<unknown>;
      return (async (path: string, ...rest: unknown[]) => {
        const written = await write(path, ...rest);
        if (path === ".distributor.json") controller.abort(new Error("interrupted"));
        return written;
      }) as never;
    });
    const report = await promote({
      config,
      pipelineId: "site",
      destinationId: "www",
      to: id,
      backends: interrupting,
      signal: controller.signal,
    });
    expect(report).toMatchObject({ to: id, switched: true, finished_after_interrupt: true });
    expect(await live()).toBe(id);
  });
});

describe("a source staged under another configuration", () => {
  async function markdownConfig(mode: "sidecar" | "index"): Promise<Config> {
    const source = join(dir, "md");
    await writeSourceBundle(
      createLocalBackend({ root: source }),
      "",
      { "page.md": "# Page\n" },
      { id: "site", created: new Date(Date.UTC(2026, 5, 9)) },
    );
    return parseConfig(
      `pipelines:\n  - id: site\n    source: {backend: local, path: ${source}}\n    destinations:\n      - id: www\n        backend: local\n        path: ${dest()}\n        path_mapping: {mode: fixed}\n        publish: {source: false, html: true}\n        transform: {markdown_to_html: {enabled: true, mode: ${mode}}}\n        layout: releases\n        releases: {keep: 3}\n`,
    );
  }

  it("is neither reused by staging nor promoted by a run", async () => {
    await run({ config: await configFor(1, "{keep: 3}"), backends: backends() });
    const before = await live();
    const sidecar = await markdownConfig("sidecar");
    const first = await stage({ config: sidecar, backends: backends() });
    expect(first.actions[0]?.error).toBeNull();
    const id = first.actions[0]?.release_id as string;
    expect(await readdir(join(dest(), "releases", id))).toContain("page.html");
    const index = await markdownConfig("index");
    const restaged = await stage({ config: index, backends: backends() });
    expect(restaged.actions[0]?.status).toBe("staged");
    expect(restaged.actions[0]?.release_id).not.toBe(id);
    expect(restaged.actions[0]?.warnings.map((w) => w.code)).toEqual(["staged_outdated"]);
    const published = await run({ config: await markdownConfig("sidecar"), backends: backends() });
    // The newest staged release of the source was staged under index: sidecar publishes afresh.
    expect(published.actions[0]?.status).toBe("published");
    expect(published.actions[0]?.warnings.map((w) => w.code)).toEqual(["staged_outdated"]);
    expect(await live()).not.toBe(before);
    expect(await live()).not.toBe(id);
    expect(await readdir(join(dest(), "current"))).toEqual(["page.html"]);
  });
});

describe("rollback --previous after a promotion", () => {
  it("returns to the release that was live, never to a staged one nobody promoted", async () => {
    await run({ config: await configFor(1, "{keep: 1}"), backends: backends() });
    const before = await live();
    await stage({ config: await configFor(2, "{keep: 1}"), backends: backends() });
    const config = await configFor(3, "{keep: 1}");
    const id = (await stage({ config, backends: backends() })).actions[0]?.release_id as string;
    const where = { config, pipelineId: "site", destinationId: "www", backends: backends() };
    await promote({ ...where, to: id });
    expect(await live()).toBe(id);
    // A run of the promoted source skips and finishes retention: the release kept for a return is
    // the one that was live, not the unpromoted one staged between.
    expect((await run({ config, backends: backends() })).actions[0]?.status).toBe("skipped");
    expect(await committed()).toEqual([before, id]);
    const back = await rollback({ ...where, to: undefined });
    expect(back.to).toBe(before);
    expect(await live()).toBe(before);
  });
});
