import { mkdtemp, readdir, readlink, rm, symlink, unlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { memoryStores, writeSourceBundle } from "@distributor/engine/testing";
import { createLocalBackend } from "@distributor/storage";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type Config, parseConfig } from "../../src/config/index.js";
import { adoptOutputs } from "../../src/maintenance/adopt.js";
import { audit } from "../../src/maintenance/audit.js";
import { reconcileState } from "../../src/maintenance/reconcile-state.js";
import { rollback } from "../../src/maintenance/rollback.js";
import { run } from "../../src/run/run.js";
import { aroundWrites, registryFor } from "../support/registries.js";

// What `layout: releases` refuses, and the states it will not make live.

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "distributor-releases-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function configFor(version: number, backend = "local", keep = 5): Promise<Config> {
  const source = join(dir, `v${version}`);
  await writeSourceBundle(
    createLocalBackend({ root: source }),
    "",
    { "index.html": `v${version}\n` },
    {
      id: "site",
      created: new Date(Date.UTC(2026, 5, version)),
    },
  );
  const where = backend === "s3" ? "bucket: www" : `path: ${join(dir, "www")}`;
  return parseConfig(
    `pipelines:\n  - id: site\n    source: {backend: local, path: ${source}}\n    destinations:\n      - id: www\n        backend: local\n        ${where}\n        path_mapping: {mode: fixed}\n        layout: releases\n        releases: {keep: ${keep}}\n`,
  );
}

const dest = () => join(dir, "www");

/** A pipeline publishing `source` to the local destination, `layout: releases`. */
const localReleases = (source: string): Config =>
  parseConfig(
    `pipelines:\n  - id: site\n    source: {backend: local, path: ${source}}\n    destinations:\n      - id: www\n        backend: local\n        path: ${dest()}\n        path_mapping: {mode: fixed}\n        layout: releases\n        releases: {keep: 5}\n`,
  );

async function publish(config: Config, engine: "local" | "memory" = "local") {
  const report = await run({ config, backends: registryFor(engine, memoryStores(), dest()) });
  return report.actions[0];
}

describe("layout: releases refuses", () => {
  it("a store without links, before anything is written", async () => {
    const action = await publish(await configFor(1), "memory");
    expect(action?.status).toBe("failed");
    expect(action?.error?.message).toContain("hardlink@openssh.com and posix-rename@openssh.com");
  });

  it("reconcile-state in every mode, and rollback without an earlier release", async () => {
    const config = await configFor(1);
    expect((await publish(config))?.status).toBe("published");
    const where = { config, pipelineId: "site", destinationId: "www" };
    await expect(reconcileState(where)).rejects.toMatchObject({ code: "unsupported_layout" });
    await expect(adoptOutputs({ ...where, mode: "adopt" })).rejects.toMatchObject({
      code: "unsupported_layout",
    });
    // --rebuild restores an unreadable state from a snapshot: a valid one is left alone.
    await expect(adoptOutputs({ ...where, mode: "rebuild" })).rejects.toMatchObject({
      code: "state_valid",
    });
    await expect(rollback({ ...where, to: undefined })).rejects.toMatchObject({
      code: "no_previous_release",
      message: expect.stringMatching(/no committed release before/),
    });
  });

  it("to make live a release whose directory is gone: the run publishes it again instead", async () => {
    expect((await publish(await configFor(1)))?.status).toBe("published");
    const first = await readlink(join(dest(), "current"));
    expect((await publish(await configFor(2)))?.status).toBe("published");
    const second = await readlink(join(dest(), "current"));
    // As if the run of v2 died after its commit, and its release then went missing.
    await unlink(join(dest(), "current"));
    await symlink(first, join(dest(), "current"));
    await rm(join(dest(), second), { recursive: true });
    const action = await publish(await configFor(2));
    expect(action?.status, action?.error?.message).toBe("published");
    expect(action?.warnings).toEqual([
      expect.objectContaining({
        code: "release_missing",
        message: expect.stringContaining(second.slice("releases/".length)),
      }),
    ]);
    const live = await readlink(join(dest(), "current"));
    expect(live).not.toBe(first);
    expect(live).not.toBe(second);
    expect(await readdir(join(dest(), live))).toEqual(["index.html"]);
    // The state records the new release, and the next run of that source skips.
    const again = await publish(await configFor(2));
    expect(again?.action).toBe("skip_same");
  });
});

describe("layout: releases finishes", () => {
  it("a retention left undone, in the next run even when it only skips", async () => {
    for (const version of [1, 2, 3]) {
      expect((await publish(await configFor(version)))?.status).toBe("published");
    }
    const names = async () => (await readdir(join(dir, "www", "releases"))).sort();
    const [oldest] = (await names()).filter((name) => !name.endsWith(".json"));
    // As if the run of v3 had died between its switch and its retention under `keep: 2`.
    const skipped = await publish(await configFor(3, "local", 2));
    expect(skipped?.action).toBe("skip_same");
    const left = await names();
    expect(left.filter((name) => !name.endsWith(".json"))).toHaveLength(2);
    expect(left.some((name) => name.startsWith(oldest as string))).toBe(false);
    // The lease it took to do so is released.
    expect(await readdir(join(dir, "www"))).not.toContain(".distributor.lease.json");
    expect((await publish(await configFor(3, "local", 2)))?.action).toBe("skip_same");
  });

  it("another run's release that lost a file: its identity record names it, and audit reports it missing", async () => {
    const configs: Config[] = [];
    for (const [version, files] of [
      [1, { "index.html": "one\n", "a.css": "a\n" }],
      [2, { "index.html": "two\n", "a.css": "a\n", "d.js": "d\n" }],
    ] as const) {
      const source = join(dir, `v${version}`);
      await writeSourceBundle(createLocalBackend({ root: source }), "", files, {
        id: "site",
        created: new Date(Date.UTC(2026, 5, version)),
      });
      configs.push(localReleases(source));
    }
    const [v1, v2] = configs as [Config, Config];
    expect(
      (await run({ config: v1, backends: registryFor("local", memoryStores(), dest()) })).actions[0]
        ?.status,
    ).toBe("published");
    // The run of v2 dies once its state records the new release, before its identity record.
    const dies = aroundWrites(dest(), async (path, write) => {
      if (path.endsWith(".files.json")) throw new Error("the power failed");
      return write();
    });
    expect((await run({ config: v2, backends: dies })).actions[0]?.status).toBe("failed");
    const built = (await readdir(join(dest(), "releases")))
      .filter((n) => !n.endsWith(".json"))
      .sort()
      .at(-1) as string;
    expect(await readlink(join(dest(), "current"))).not.toBe(`releases/${built}`);
    // As a power cut under fsync: false can: the name of a file the dead run wrote is gone.
    await unlink(join(dest(), "releases", built, "d.js"));
    await run({ config: v2, backends: registryFor("local", memoryStores(), dest()) });
    const report = await audit({
      config: v1,
      backends: registryFor("local", memoryStores(), dest()),
    });
    const release = report.destinations[0]?.bundles[0]?.release?.releases.find(
      (r) => r.id === built,
    );
    expect(release?.missing).toEqual(["d.js"]);
    expect(release?.status).toBe("drift");
  });

  it("a file named __proto__: its identity is recorded like any other, and audit finds nothing", async () => {
    const source = join(dir, "proto");
    await writeSourceBundle(
      createLocalBackend({ root: source }),
      "",
      { "index.html": "x\n", ["__proto__"]: "p\n" },
      { id: "site", created: new Date(Date.UTC(2026, 5, 1)) },
    );
    const config = localReleases(source);
    expect((await publish(config))?.status).toBe("published");
    const report = await audit({ config, backends: registryFor("local", memoryStores(), dest()) });
    const [release] = report.destinations[0]?.bundles[0]?.release?.releases ?? [];
    expect(release?.added).toEqual([]);
    expect(release?.status).toBe("ok");
  });
});
