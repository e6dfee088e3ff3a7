import { execFileSync } from "node:child_process";
import { rmSync, statSync, writeFileSync } from "node:fs";
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  CREATED,
  manifestFor,
  singleOwnerState,
  writeSourceBundle,
  writeStateWithOutputs,
} from "@distributor/engine/testing";
import { allManagedOutputPaths, findOwner, ownerScope, parseDocument } from "@distributor/state";
import { createLocalBackend } from "@distributor/storage";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { BackendRegistry } from "../../src/backends/registry.js";
import { parseConfig } from "../../src/config/index.js";
import { run, runSucceeded } from "../../src/run/run.js";
import type { RunEvent } from "../../src/run/types.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "distributor-run-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const exists = (path: string) =>
  stat(path).then(
    () => true,
    () => false,
  );

function destination(id: string, path: string, extra = ""): string {
  return `      - id: ${id}\n        backend: local\n        path: ${path}\n${extra}`;
}

function pipeline(id: string, source: string, destinations: string): string {
  return `  - id: ${id}\n    source: {backend: local, path: ${source}}\n    destinations:\n${destinations}`;
}

describe("run workflow", () => {
  it("TestRunSharedRootDryRunWritesNoOutputsOrState", async () => {
    const source = join(dir, "src");
    const dest = join(dir, "dest");
    await writeSourceBundle(createLocalBackend({ root: source }), "", {
      "report.md": "# Report\n",
    });
    const config = parseConfig(
      `pipelines:\n${pipeline("reports", source, destination("archive", dest, "        state: {mode: shared_root}\n"))}`,
    );
    const report = await run({ config, dryRun: true });
    expect(report.dry_run).toBe(true);
    expect(report.actions.map((a) => `${a.action}:${a.status}`)).toEqual(["publish_new:planned"]);
    expect(await exists(join(dest, "report.md"))).toBe(false);
    expect(await exists(join(dest, ".distributor.json"))).toBe(false);
  });

  it("TestRunPublishesTwoPipelinesIntoSharedRoot", async () => {
    const first = join(dir, "first");
    const second = join(dir, "second");
    const dest = join(dir, "dest");
    await writeSourceBundle(
      createLocalBackend({ root: first }),
      "",
      { "first.md": "# First\n" },
      { id: "reports.first" },
    );
    await writeSourceBundle(
      createLocalBackend({ root: second }),
      "",
      { "second.md": "# Second\n" },
      { id: "reports.second" },
    );
    const shared = (id: string) => destination(id, dest, "        state: {mode: shared_root}\n");
    const config = parseConfig(
      `pipelines:\n${pipeline("reports-first", first, shared("archive"))}${pipeline("reports-second", second, shared("archive"))}`,
    );
    const events: RunEvent["type"][] = [];
    const report = await run({ config, onEvent: (event) => events.push(event.type) });
    expect(runSucceeded(report)).toBe(true);
    expect(await readFile(join(dest, "first.md"), "utf8")).toBe("# First\n");
    expect(await readFile(join(dest, "second.md"), "utf8")).toBe("# Second\n");
    const state = parseDocument(await readFile(join(dest, ".distributor.json"), "utf8"));
    if (state.schemaVersion !== 3) throw new Error("expected shared-root state");
    expect(state.owners).toHaveLength(2);
    expect(findOwner(state, ownerScope("reports-first", "archive"))).toBeDefined();
    expect(findOwner(state, ownerScope("reports-second", "archive"))).toBeDefined();
    expect(allManagedOutputPaths(state).join(",")).toBe("first.md,second.md");
    const onePipeline = [
      "pipeline_start",
      "validation_start",
      "file_validated",
      "bundle_validated",
      "plan",
      "output_written",
      "destination_done",
    ];
    expect(events).toEqual([...onePipeline, ...onePipeline]);
  });

  it("a replacement keeps an unchanged output, and under --repair rewrites one that drifted", async () => {
    const source = join(dir, "src");
    const dest = join(dir, "dest");
    const backend = createLocalBackend({ root: source });
    const older = new Date(CREATED.getTime() - 7_200_000);
    const files = { "same.txt": "same\n", "kept.txt": "kept\n", "changed.txt": "one\n" };
    await writeSourceBundle(backend, "", files, { created: older });
    const config = parseConfig(
      `pipelines:\n${pipeline("reports", source, destination("archive", dest))}`,
    );
    expect(runSucceeded(await run({ config }))).toBe(true);
    const sameInode = (await stat(join(dest, "same.txt"))).ino;
    // Other bytes of the same size: only hashing tells them from the record.
    await writeFile(join(dest, "kept.txt"), "KEPT\n");

    await writeSourceBundle(
      backend,
      "",
      { ...files, "changed.txt": "two\n" },
      {
        created: new Date(CREATED.getTime() - 3_600_000),
      },
    );
    const repaired = await run({ config, repair: true });
    expect(runSucceeded(repaired)).toBe(true);
    const [action] = repaired.actions;
    expect(action?.action).toBe("replace_older");
    expect(action?.outputs.map((output) => output.path).sort()).toEqual([
      "changed.txt",
      "kept.txt",
    ]);
    expect(await readFile(join(dest, "kept.txt"), "utf8")).toBe("kept\n");
    expect(await readFile(join(dest, "changed.txt"), "utf8")).toBe("two\n");
    expect((await stat(join(dest, "same.txt"))).ino).toBe(sameInode);
  });

  it("TestRunMergeReconciliationRetainsManagedOutput", async () => {
    const source = join(dir, "src");
    const dest = join(dir, "dest");
    const manifest = await writeSourceBundle(createLocalBackend({ root: source }), "", {
      "report.md": "# Report\nNew.\n",
    });
    const older = manifestFor(
      { "report.md": "old\n", "summary.txt": "old summary\n" },
      { id: manifest.id, created: new Date(CREATED.getTime() - 3_600_000) },
    );
    await writeStateWithOutputs(createLocalBackend({ root: dest }), "", singleOwnerState(older));
    const config = parseConfig(
      `pipelines:\n${pipeline("reports", source, destination("archive", dest, "        reconciliation: {mode: merge}\n"))}`,
    );
    const report = await run({ config, now: () => new Date("2026-06-05T00:00:00Z") });
    expect(report.actions[0]).toMatchObject({ action: "replace_older", status: "published" });
    expect(await readFile(join(dest, "report.md"), "utf8")).toBe("# Report\nNew.\n");
    expect(await readFile(join(dest, "summary.txt"), "utf8")).toBe("old");
    const state = parseDocument(await readFile(join(dest, ".distributor.json"), "utf8"));
    if (state.schemaVersion !== 2) throw new Error("expected single-owner state");
    expect(state.reconciliation.mode).toBe("merge");
    expect(state.outputs).toHaveLength(2);
  });

  it("reports validation totals, each file validated, and the deletes after the state write", async () => {
    const source = join(dir, "src");
    const dest = join(dir, "dest");
    const manifest = await writeSourceBundle(createLocalBackend({ root: source }), "", {
      "report.md": "# Report\nNew.\n",
      "data/a.csv": "a,b\n1,2\n",
    });
    const older = manifestFor(
      { "report.md": "old\n", "summary.txt": "old summary\n", "gone.txt": "gone\n" },
      { id: manifest.id, created: new Date(CREATED.getTime() - 3_600_000) },
    );
    await writeStateWithOutputs(createLocalBackend({ root: dest }), "", singleOwnerState(older));
    const config = parseConfig(
      `pipelines:\n${pipeline("reports", source, destination("archive", dest))}`,
    );
    const events: RunEvent[] = [];
    const report = await run({ config, onEvent: (event) => events.push(event) });
    expect(report.actions[0]).toMatchObject({ action: "replace_older", status: "published" });
    expect(await exists(join(dest, "summary.txt"))).toBe(false);
    expect(events.find((e) => e.type === "validation_start")).toEqual({
      type: "validation_start",
      pipeline_id: "reports",
      bundles: 1,
      files: 2,
      bytes: 22,
    });
    const validated = events.filter((e) => e.type === "file_validated");
    expect(
      validated.map((e) => `${e.pipeline_id}:${e.bundle_path}:${e.path}:${e.size}`).sort(),
    ).toEqual(["reports:.:data/a.csv:8", "reports:.:report.md:14"].sort());
    const types = events.map((e) => e.type);
    expect(types.slice(types.indexOf("output_written"))).toEqual([
      "output_written",
      "output_written",
      "cleanup_start",
      "cleanup_done",
      "destination_done",
    ]);
    expect(events.find((e) => e.type === "cleanup_start")).toEqual({
      type: "cleanup_start",
      pipeline_id: "reports",
      destination_id: "archive",
      bundle_path: ".",
      deletes: 2,
    });
  });

  it("publishes only the newest bundle at the root of a fixed destination", async () => {
    const source = join(dir, "src");
    const latest = join(dir, "latest");
    const backend = createLocalBackend({ root: source });
    await writeSourceBundle(
      backend,
      "2026-06-01",
      { "report.md": "one\n" },
      { id: "daily.1", created: new Date("2026-06-01T00:00:00Z") },
    );
    await writeSourceBundle(
      backend,
      "2026-06-02",
      { "report.md": "two\n" },
      { id: "daily.2", created: new Date("2026-06-02T00:00:00Z") },
    );
    await writeSourceBundle(
      backend,
      "2026-05-31",
      { "report.md": "old\n" },
      { id: "daily.0", created: new Date("2026-05-31T00:00:00Z") },
    );
    const config = parseConfig(
      `pipelines:\n${pipeline("reports", source, destination("latest", latest, "        path_mapping: {mode: fixed}\n"))}`,
    );
    const report = await run({ config });
    expect(report.actions.map((a) => `${a.bundle_path}:${a.source_id}:${a.action}`)).toEqual([
      ".:daily.2:publish_new",
    ]);
    expect(await readFile(join(latest, "report.md"), "utf8")).toBe("two\n");
  });

  it("publishes every bundle at its relative path with preserve_relative", async () => {
    const source = join(dir, "src");
    const archive = join(dir, "archive");
    const backend = createLocalBackend({ root: source });
    await writeSourceBundle(backend, "b", { "r.md": "b\n" }, { id: "b" });
    await writeSourceBundle(backend, "a/x", { "r.md": "a\n" }, { id: "a" });
    const config = parseConfig(
      `pipelines:\n${pipeline("reports", source, destination("archive", archive))}`,
    );
    const report = await run({ config });
    expect(report.actions.map((a) => a.bundle_path)).toEqual(["a/x", "b"]);
    expect(await readFile(join(archive, "a/x/r.md"), "utf8")).toBe("a\n");
    expect(await exists(join(archive, "a/x/.distributor.json"))).toBe(true);
    expect(await exists(join(archive, "b/.distributor.json"))).toBe(true);
  });

  it("runs only the pipelines named, and refuses an http_upload pipeline", async () => {
    const source = join(dir, "src");
    await writeSourceBundle(createLocalBackend({ root: source }), "", { "r.md": "r\n" });
    const config = parseConfig(
      `upload_tokens: [{id: t, token_env: TOKEN, allow_pipelines: [uploads]}]\npipelines:\n${pipeline("one", source, destination("d", join(dir, "one")))}${pipeline("two", source, destination("d", join(dir, "two")))}  - id: uploads\n    source: {backend: http_upload}\n    destinations:\n${destination("d", join(dir, "up"))}`,
    );
    const report = await run({ config, pipelineIds: ["two"] });
    expect(report.actions.map((a) => a.pipeline_id)).toEqual(["two"]);
    expect(await exists(join(dir, "one"))).toBe(false);
    await expect(run({ config, pipelineIds: ["uploads"] })).rejects.toThrow(
      /runs only under serve/,
    );
    await expect(run({ config, pipelineIds: ["missing"] })).rejects.toThrow(
      /pipeline "missing" not found/,
    );
    const all = await run({ config });
    expect(all.actions.map((a) => a.pipeline_id)).toEqual(["one", "two"]);
  });

  it("keeps publishing the other destinations when one destination's backend fails to close", async () => {
    const source = join(dir, "src");
    await writeSourceBundle(createLocalBackend({ root: source }), "", { "r.md": "r\n" });
    const first = join(dir, "first");
    const second = join(dir, "second");
    const config = parseConfig(
      `pipelines:\n${pipeline("reports", source, destination("first", first) + destination("second", second))}`,
    );
    // Fault injection: the first destination's backend fails when closed.
    const backends: BackendRegistry = {
      local: async (location) => {
        const backend = createLocalBackend({ root: location.path });
        if (location.path !== first) return backend;
        return new Proxy(backend, {
          get(target, property) {
            if (property === "close") {
              return async () => {
                throw new Error("injected close failure");
              };
            }
            const value = Reflect.get(target, property, target);
            return typeof value === "function" ? value.bind(target) : value;
          },
        });
      },
    };
    const report = await run({ config, backends });
    expect(report.actions.map((a) => `${a.destination_id}:${a.status}`)).toEqual([
      "first:published",
      "second:published",
    ]);
    expect(await readFile(join(second, "r.md"), "utf8")).toBe("r\n");
  });

  it("reads only manifests and state when every destination skips (docs/design/bundles.md)", async () => {
    const source = join(dir, "src");
    const backend = createLocalBackend({ root: source });
    await writeSourceBundle(backend, "a", { "r.md": "# A\n", "big.bin": "x".repeat(100_000) });
    await writeSourceBundle(backend, "b", { "r.md": "# B\n" });
    const config = parseConfig(
      `pipelines:\n${pipeline("reports", source, destination("one", join(dir, "one")) + destination("two", join(dir, "two"), "        publish: {source: true, html: true}\n        transform: {markdown_to_html: {enabled: true}}\n"))}`,
    );
    expect(runSucceeded(await run({ config }))).toBe(true);

    const sourceReads: string[] = [];
    const backends: BackendRegistry = {
      local: async (location) => {
        const inner = createLocalBackend({ root: location.path });
        if (location.path !== source) return inner;
        return new Proxy(inner, {
          get(target, property) {
            const value = Reflect.get(target, property, target);
            if (typeof value !== "function") return value;
            return (...args: unknown[]) => {
              if (
                [
                  "openRead",
                  "openReader",
                  "openVersionedReader",
                  "readFile",
                  "readVersioned",
                ].includes(String(property))
              ) {
                sourceReads.push(String(args[0]));
              }
              return (value as (...a: unknown[]) => unknown).apply(target, args);
            };
          },
        });
      },
    };
    const events: string[] = [];
    const again = await run({ config, backends, onEvent: (event) => events.push(event.type) });

    expect(again.actions.map((a) => a.action)).toEqual([
      "skip_same",
      "skip_same",
      "skip_same",
      "skip_same",
    ]);
    expect(sourceReads.sort()).toEqual(["a/manifest.json", "b/manifest.json"]);
    expect(events).not.toContain("bundle_validated");
  });

  it("still validates every bundle before the first write and publishes nothing if one is invalid", async () => {
    const source = join(dir, "src");
    const backend = createLocalBackend({ root: source });
    await writeSourceBundle(backend, "a", { "r.md": "# A\n" });
    await writeSourceBundle(backend, "b", { "r.md": "# B\n" });
    await writeFile(join(source, "b", "r.md"), "# B, changed after the manifest\n");
    const dest = join(dir, "dest");
    const config = parseConfig(
      `pipelines:\n${pipeline("reports", source, destination("one", dest))}`,
    );

    const report = await run({ config });

    expect(report.pipeline_errors.map((e) => e.code)).toEqual(["bundle_invalid"]);
    expect(report.pipeline_errors[0]?.message).toContain("bundle b");
    expect(await exists(dest)).toBe(false);
  });

  it("validates and copies many files under one signal without a listener-leak warning", async () => {
    const source = join(dir, "src");
    const files = Object.fromEntries(
      Array.from({ length: 60 }, (_, index) => [`d${index % 3}/f${index}.txt`, `file ${index}`]),
    );
    await writeSourceBundle(createLocalBackend({ root: source }), "", files);
    const config = parseConfig(
      `pipelines:\n${pipeline("reports", source, destination("one", join(dir, "dest")))}`,
    );
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.name);
    process.on("warning", onWarning);
    try {
      const report = await run({ config, signal: new AbortController().signal });
      expect(runSucceeded(report)).toBe(true);
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off("warning", onWarning);
    }
    expect(warnings).not.toContain("MaxListenersExceededWarning");
  });

  describe("a source file changed after validation", () => {
    // Validation hashed the bytes; the copy hashes them again (docs/design/commit-protocol.md), so a change that keeps
    // the file's size and times — invisible to anything but the bytes — is still caught.
    async function changedAfterValidation(change: (path: string) => void) {
      const source = join(dir, "src");
      const backend = createLocalBackend({ root: source });
      await writeSourceBundle(backend, "a", { "keep.txt": "kept", "r.txt": "original" });
      await writeSourceBundle(backend, "b", { "other.txt": "other" });
      const dest = join(dir, "dest");
      const config = parseConfig(
        `pipelines:\n${pipeline("reports", source, destination("one", dest))}`,
      );
      const path = join(source, "a", "r.txt");
      const report = await run({
        config,
        onEvent: (event) => {
          if (event.type === "bundle_validated" && event.bundle_path === "b") change(path);
        },
      });
      return { report, dest };
    }

    // `touch -r` copies timestamps to the nanosecond, which Node's utimes cannot.
    const sameSizeAndTimes = (path: string, text: string) => {
      const reference = `${path}.times`;
      execFileSync("touch", ["-r", path, reference]);
      writeFileSync(path, text);
      execFileSync("touch", ["-r", reference, path]);
      rmSync(reference);
      const after = statSync(path, { bigint: true });
      expect(after.size).toBe(BigInt(text.length));
    };

    it("is refused when rewritten in place with its size and times restored", async () => {
      const { report, dest } = await changedAfterValidation((path) =>
        sameSizeAndTimes(path, "tampered"),
      );
      const action = report.actions.find((a) => a.bundle_path === "a");
      expect(action?.status).toBe("failed");
      expect(action?.error?.code).toBe("source_changed");
      expect(action?.error?.message).toContain(
        "r.txt: source changed while copying: sha256 mismatch",
      );
      expect(await exists(join(dest, "a", "r.txt"))).toBe(false);
      expect(await exists(join(dest, "a", "keep.txt"))).toBe(false);
    });

    it("is published when rewritten with the same bytes, which the copy checks again", async () => {
      const { report, dest } = await changedAfterValidation((path) =>
        sameSizeAndTimes(path, "original"),
      );
      expect(report.actions.map((a) => a.status)).toEqual(["published", "published"]);
      expect(await readFile(join(dest, "a", "r.txt"), "utf8")).toBe("original");
    });
  });
});
