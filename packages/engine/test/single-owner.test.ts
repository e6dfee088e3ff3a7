import { serializeManifest } from "@distributor/bundle";
import { parseDocument, type SingleOwnerState, serializeDocument } from "@distributor/state";
import { type StorageBackend, statePath } from "@distributor/storage";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  BACKEND_KINDS,
  CREATED,
  executeCase,
  exists,
  failingWrites,
  manifestFor,
  newBackend,
  type PublishCase,
  planCase,
  readText,
  removeTempBackends,
  singleOwnerState,
  useBackendKind,
  writeSourceBundle,
  writeStateWithOutputs,
} from "../src/testing/fixtures.js";

const NEW_REPORT = "# Report\nNew.\n";
const HOUR = 3_600_000;

async function readState(backend: StorageBackend, bundlePath = ""): Promise<SingleOwnerState> {
  const document = parseDocument(await readText(backend, statePath(bundlePath)));
  if (document.schemaVersion !== 2) throw new Error("expected single-owner state");
  return document;
}

/** A source with `report.md` (new content) and a destination holding an older publication. */
async function olderPublication(
  olderFiles: Record<string, string>,
  sourceFiles: Record<string, string> = { "report.md": NEW_REPORT },
) {
  const source = newBackend();
  const manifest = await writeSourceBundle(source, "", sourceFiles);
  const destination = newBackend();
  const older = manifestFor(olderFiles, { created: new Date(CREATED.getTime() - HOUR) });
  const existing = singleOwnerState(older);
  await writeStateWithOutputs(destination, "", existing);
  const c: PublishCase = { source, sourceBundlePath: "", manifest, destination };
  return { c, existing, source, destination };
}

describe.each(BACKEND_KINDS)("%s: single-owner publication", (kind) => {
  beforeAll(() => useBackendKind(kind));
  afterAll(removeTempBackends);
  it("publishes new outputs and writes schema 2 state last", async () => {
    const source = newBackend();
    const manifest = await writeSourceBundle(source, "daily", {
      "report.md": NEW_REPORT,
      "data/a.txt": "a",
    });
    const destination = newBackend();
    const c: PublishCase = { source, sourceBundlePath: "daily", manifest, destination };
    const plan = await planCase(c);
    expect(plan.action).toBe("publish_new");
    await executeCase(c, plan);
    expect(await readText(destination, "daily/report.md")).toBe(NEW_REPORT);
    expect(await readText(destination, "daily/data/a.txt")).toBe("a");
    const state = await readState(destination, "daily");
    expect(state.pipelineId).toBe("reports");
    expect(state.reconciliation.mode).toBe("replace");
    expect(state.outputs.map((o) => o.path)).toEqual(["data/a.txt", "report.md"]);
    expect(state.createdAt.toISOString()).toBe("2026-06-04T12:00:00.000Z");
  });

  it("a replacement writes only what changed, and again what is missing or cut short", async () => {
    const files = { "same.txt": "same\n", "changed.txt": "one\n", "gone.txt": "gone\n" };
    const older = newBackend();
    const v1 = await writeSourceBundle(
      older,
      "",
      { ...files, "cut.txt": "cut short\n" },
      {
        created: new Date(CREATED.getTime() - HOUR),
      },
    );
    const destination = newBackend();
    const first: PublishCase = { source: older, sourceBundlePath: "", manifest: v1, destination };
    await executeCase(first, await planCase(first));
    await destination.deletePaths("", ["gone.txt"]);
    await destination.writeFile("cut.txt", "cut", { overwrite: true });
    const sameVersion = (await destination.stat("same.txt")).version;

    const newer = newBackend();
    const v2 = await writeSourceBundle(newer, "", {
      ...files,
      "changed.txt": "two\n",
      "cut.txt": "cut short\n",
    });
    const c: PublishCase = { source: newer, sourceBundlePath: "", manifest: v2, destination };
    const plan = await planCase(c);
    expect(plan.action).toBe("replace_older");
    // Kept: same.txt, recorded with the same digest and stored at its recorded size.
    expect(plan.writes.map((write) => write.output.path).sort()).toEqual([
      "changed.txt",
      "cut.txt",
      "gone.txt",
    ]);
    expect(plan.outputs.map((output) => output.path).sort()).toEqual([
      "changed.txt",
      "cut.txt",
      "gone.txt",
    ]);
    await executeCase(c, plan);
    expect((await destination.stat("same.txt")).version).toBe(sameVersion);
    for (const [path, text] of Object.entries({ ...files, "changed.txt": "two\n" })) {
      expect(await readText(destination, path)).toBe(text);
    }
    expect(await readText(destination, "cut.txt")).toBe("cut short\n");
    const state = await readState(destination);
    expect(state.source.manifest.digest).toBe(v2.digest);
    expect(state.outputs.map((output) => [output.path, output.sha256])).toEqual(
      v2.files.map((file) => [file.path, file.sha256]),
    );
  });

  it("a replacement whose kept output changed while it ran commits nothing", async () => {
    const older = newBackend();
    const v1 = await writeSourceBundle(
      older,
      "",
      { "same.txt": "same\n", "changed.txt": "one\n" },
      {
        created: new Date(CREATED.getTime() - HOUR),
      },
    );
    const destination = newBackend();
    const first: PublishCase = { source: older, sourceBundlePath: "", manifest: v1, destination };
    await executeCase(first, await planCase(first));
    const newer = newBackend();
    const v2 = await writeSourceBundle(newer, "", { "same.txt": "same\n", "changed.txt": "two\n" });
    const c: PublishCase = { source: newer, sourceBundlePath: "", manifest: v2, destination };
    const plan = await planCase(c);
    expect(plan.writes.map((write) => write.output.path)).toEqual(["changed.txt"]);
    // A late write of other bytes, of the same size, lands on the kept output after planning.
    await destination.writeFile("same.txt", "SAME\n", { overwrite: true });
    await expect(executeCase(c, plan)).rejects.toThrow(
      /1 output\(s\) the replacement keeps changed while it ran: same\.txt; nothing was committed/,
    );
    const state = await readState(destination);
    expect(state.source.manifest.digest).toBe(v1.digest);
    expect(state.replacing).toBeDefined();
  });

  it("skips an identical source on the next run", async () => {
    const source = newBackend();
    const manifest = await writeSourceBundle(source, "", { "report.md": NEW_REPORT });
    const destination = newBackend();
    const c: PublishCase = { source, sourceBundlePath: "", manifest, destination };
    await executeCase(c, await planCase(c));
    // Two entries now (report.md and the state file): listing them fails at a limit of 1.
    const again = await planCase({ ...c, walkLimit: 1 });
    expect(again.action).toBe("skip_same");
  });

  it("turns a recorded file into a directory on replace, deleting the file first", async () => {
    const { c, destination } = await olderPublication(
      { "report.md": "old", docs: "old docs file" },
      { "report.md": NEW_REPORT, "docs/index.md": "# Docs\n" },
    );
    const plan = await planCase(c);
    expect(plan.action).toBe("replace_older");
    expect(plan.deletesFirst).toEqual(["docs"]);
    await executeCase(c, plan);
    expect(await readText(destination, "docs/index.md")).toBe("# Docs\n");
    const state = await readState(destination);
    expect(state.outputs.map((o) => o.path)).toEqual(["docs/index.md", "report.md"]);
  });

  it("refuses, before writing anything, an output below an unmanaged file or a file merge keeps", async () => {
    for (const [merge, recorded, expected] of [
      [true, { "report.md": "old", docs: "kept by merge" }, "fail_conflict"],
      [true, { "report.md": "old" }, "fail_unmanaged"],
      [false, { "report.md": "old" }, "fail_unmanaged"],
    ] as const) {
      const { c, destination } = await olderPublication(recorded, {
        "report.md": NEW_REPORT,
        "docs/guide.md": "# Guide\n",
      });
      if (!("docs" in recorded)) await destination.writeFile("docs", "an unmanaged file");
      if (merge) c.reconciliation = "merge";
      const plan = await planCase(c);
      expect(plan.action, JSON.stringify(recorded)).toBe(expected);
      expect(plan.writes).toEqual([]);
      expect(await readText(destination, "report.md")).toBe("old");
    }
  });

  it("TestExecuteReplaceDeletesOmittedManagedOutputs", async () => {
    const { c, destination } = await olderPublication({ "report.md": "old", "summary.txt": "old" });
    const plan = await planCase(c);
    expect(plan.action).toBe("replace_older");
    await executeCase(c, plan);
    expect(await readText(destination, "report.md")).toBe(NEW_REPORT);
    expect(await exists(destination, "summary.txt")).toBe(false);
    const state = await readState(destination);
    expect(state.outputs.map((o) => o.path)).toEqual(["report.md"]);
    expect(state.reconciliation.mode).toBe("replace");
  });

  it("TestExecuteMergeRetainsOmittedAndOverwritesManagedOutputs", async () => {
    const { c, destination, existing } = await olderPublication({
      "report.md": "old",
      "summary.txt": "old",
    });
    c.reconciliation = "merge";
    const plan = await planCase(c);
    expect(plan.action).toBe("replace_older");
    expect(plan.deletes).toEqual([]);
    expect(plan.nextState?.outputs.map((o) => o.path)).toEqual(["report.md", "summary.txt"]);
    await executeCase(c, plan);
    expect(await readText(destination, "report.md")).toBe(NEW_REPORT);
    expect(await readText(destination, "summary.txt")).toBe("old");
    const state = await readState(destination);
    const byPath = new Map(state.outputs.map((o) => [o.path, o]));
    expect(byPath.size).toBe(2);
    const oldSummary = existing.outputs.find((o) => o.path === "summary.txt");
    expect(byPath.get("summary.txt")?.createdAt).toEqual(oldSummary?.createdAt);
    expect(byPath.get("summary.txt")?.updatedAt).toEqual(oldSummary?.updatedAt);
    const report = byPath.get("report.md");
    expect(report?.createdAt).toEqual(existing.outputs[0]?.createdAt);
    expect(report?.updatedAt.getTime()).toBeGreaterThan(
      existing.outputs[0]?.updatedAt.getTime() ?? 0,
    );
    expect(state.reconciliation.mode).toBe("merge");
    expect(state.createdAt).toEqual(existing.createdAt);
  });

  it("TestExecuteMergeFailsOnUnmanagedDestinationPathCollision: refused while planning, nothing touched", async () => {
    const { c, destination } = await olderPublication({ "summary.txt": "Summary\n" });
    await destination.writeFile("report.md", "unmanaged");
    c.reconciliation = "merge";
    const before = await readText(destination, statePath(""));
    const plan = await planCase(c);
    expect(plan.action).toBe("fail_unmanaged");
    expect(plan.reason).toContain(
      "merge output path report.md exists but is not managed by destination state",
    );
    await expect(executeCase(c, plan)).rejects.toThrow(/cannot execute action fail_unmanaged/);
    expect(await readText(destination, "report.md")).toBe("unmanaged");
    expect(await readText(destination, "summary.txt")).toBe("old");
    expect(await readText(destination, statePath(""))).toBe(before);
  });

  it("refuses a replacement when the bundle path holds unmanaged content, before deleting anything", async () => {
    const { c, destination } = await olderPublication({ "report.md": "old", "summary.txt": "old" });
    await destination.writeFile("notes/keep.txt", "mine");
    const before = await readText(destination, statePath(""));
    const plan = await planCase(c);
    expect(plan.action).toBe("fail_unmanaged");
    expect(plan.reason).toContain("notes/keep.txt");
    expect(await readText(destination, "summary.txt")).toBe("old");
    expect(await readText(destination, "report.md")).toBe("old");
    expect(await readText(destination, statePath(""))).toBe(before);
  });

  it("TestExecuteCleansUpAfterWriteFailure: replace removes this attempt's outputs", async () => {
    const source = newBackend();
    const manifest = await writeSourceBundle(source, "", { "a.md": "a", "b.md": "b", "c.md": "c" });
    const store = newBackend();
    const destination = failingWrites(store, "c.md");
    const c: PublishCase = { source, sourceBundlePath: "", manifest, destination };
    const plan = await planCase(c);
    await expect(executeCase(c, plan)).rejects.toThrow(/injected failure/);
    expect(await store.hasAny("")).toBe(false);
  });

  it("TestExecuteMergeFailureCleansUpOnlyNewOutputs", async () => {
    const source = newBackend();
    const files = { "report.md": NEW_REPORT, "new.md": "new\n", "fail.md": "fail\n" };
    const manifest = await writeSourceBundle(source, "", files);
    const store = newBackend();
    const older = manifestFor(
      { "report.md": NEW_REPORT },
      { created: new Date(CREATED.getTime() - HOUR) },
    );
    await writeStateWithOutputs(store, "", singleOwnerState(older));
    const destination = failingWrites(store, "fail.md");
    const c: PublishCase = {
      source,
      sourceBundlePath: "",
      manifest,
      destination,
      reconciliation: "merge",
    };
    const plan = await planCase(c);
    expect(plan.action).toBe("replace_older");
    await expect(executeCase(c, plan)).rejects.toThrow(/injected failure/);
    expect(await readText(store, "report.md")).toBe(NEW_REPORT);
    expect(await exists(store, "new.md")).toBe(false);
    expect(await exists(store, "fail.md")).toBe(false);
    // The previous state stays: the retained and overwritten outputs are still managed.
    expect((await readState(store)).source.manifest.digest).toBe(older.digest);
  });

  for (const mode of ["replace", "merge"] as const) {
    it(`TestExecuteFixedPathSupportsReconciliationModes/${mode}`, async () => {
      const source = newBackend();
      const manifest = await writeSourceBundle(source, "new", { "report.md": NEW_REPORT });
      const destination = newBackend();
      const older = manifestFor(
        { "report.md": NEW_REPORT },
        {
          id: "older.source",
          created: new Date(CREATED.getTime() - HOUR),
        },
      );
      await writeStateWithOutputs(destination, "", singleOwnerState(older));
      const c: PublishCase = {
        source,
        sourceBundlePath: "new",
        bundlePath: "",
        manifest,
        destination,
        pathMapping: "fixed",
        reconciliation: mode,
      };
      const plan = await planCase(c);
      expect(plan.action).toBe("replace_older");
      await executeCase(c, plan);
      expect(await readText(destination, "report.md")).toBe(NEW_REPORT);
      expect((await readState(destination)).reconciliation.mode).toBe(mode);
    });
  }

  const policies = [
    { name: "source only", publish: { source: true, html: false }, paths: ["report.md"] },
    { name: "generated only", publish: { source: false, html: true }, paths: ["report.html"] },
    {
      name: "source and generated",
      publish: { source: true, html: true },
      paths: ["report.html", "report.md"],
    },
  ];
  for (const mode of ["replace", "merge"] as const) {
    for (const policy of policies) {
      it(`TestExecuteReconciliationModesHonorPublishPolicies/${mode} ${policy.name}`, async () => {
        const { c, destination } = await olderPublication({ "report.md": "old" });
        c.reconciliation = mode;
        c.publish = policy.publish;
        const plan = await planCase(c);
        await executeCase(c, plan);
        const paths = (await readState(destination)).outputs.map((o) => o.path).sort();
        for (const path of policy.paths) expect(paths).toContain(path);
        for (const path of policy.paths) expect(await exists(destination, path)).toBe(true);
      });
    }
  }

  it("rewrites a schema 1 destination as schema 2 on replacement", async () => {
    const source = newBackend();
    const manifest = await writeSourceBundle(source, "", { "report.md": NEW_REPORT });
    const destination = newBackend();
    const older = manifestFor(
      { "report.md": "old" },
      { created: new Date(CREATED.getTime() - HOUR) },
    );
    const v1 = {
      schema_version: 1,
      pipeline_id: "reports",
      destination_id: "archive",
      published_at: "2026-05-30T11:12:00Z",
      source: { manifest: JSON.parse(serializeManifest(older)) },
      outputs: [
        {
          path: "report.md",
          kind: "source",
          source_path: "report.md",
          sha256: older.files[0]?.sha256,
          size: 3,
        },
      ],
    };
    await destination.writeFile(statePath(""), `${JSON.stringify(v1, null, 2)}\n`);
    await destination.writeFile("report.md", "old");
    const c: PublishCase = { source, sourceBundlePath: "", manifest, destination };
    const plan = await planCase(c);
    expect(plan.action).toBe("replace_older");
    await executeCase(c, plan);
    const raw = JSON.parse(await readText(destination, statePath("")));
    expect(raw.schema_version).toBe(2);
    expect(raw.created_at).toBe("2026-05-30T11:12:00Z");
    expect(await readText(destination, "report.md")).toBe(NEW_REPORT);
  });

  it("force replaces only inside the bundle path", async () => {
    const source = newBackend();
    const manifest = await writeSourceBundle(source, "bundle", { "report.md": NEW_REPORT });
    const destination = newBackend({
      files: {
        "bundle/unmanaged.txt": "x",
        "bundle/nested/old.txt": "y",
        "bundle-sibling/keep.txt": "keep",
      },
    });
    const c: PublishCase = { source, sourceBundlePath: "bundle", manifest, destination };
    expect((await planCase(c)).action).toBe("fail_unmanaged");
    c.force = true;
    const plan = await planCase(c);
    expect(plan.action).toBe("force_replace");
    await executeCase(c, plan);
    expect(await exists(destination, "bundle/unmanaged.txt")).toBe(false);
    expect(await exists(destination, "bundle/nested/old.txt")).toBe(false);
    expect(await readText(destination, "bundle-sibling/keep.txt")).toBe("keep");
    expect(await readText(destination, "bundle/report.md")).toBe(NEW_REPORT);
  });

  it("skips despite a destination too large to list, but refuses to replace it", async () => {
    const { c, destination } = await olderPublication({ "report.md": "old", "summary.txt": "old" });
    c.walkLimit = 2;
    const before = await readText(destination, statePath(""));
    const plan = await planCase(c);
    expect(plan.action).toBe("fail_unmanaged");
    expect(plan.reason).toContain("holds more than 2 entries");
    expect(await readText(destination, statePath(""))).toBe(before);

    await executeCase(
      { ...c, walkLimit: undefined },
      await planCase({ ...c, walkLimit: undefined }),
    );
    // Two entries now (report.md and the state file): listing them fails at a limit of 1.
    const again = await planCase({ ...c, walkLimit: 1 });
    expect(again.action).toBe("skip_same");
  });

  it("reports another pipeline's state as a conflict", async () => {
    const { c } = await olderPublication({ "report.md": "old" });
    c.pipelineId = "other";
    const plan = await planCase(c);
    expect(plan.action).toBe("fail_conflict");
    expect(plan.reason).toContain('pipeline id "reports" does not match "other"');
  });

  it("refuses a source file that changed after validation and cleans up", async () => {
    const source = newBackend();
    const manifest = await writeSourceBundle(source, "", { "a.txt": "a", "b.txt": "b" });
    await source.writeFile("b.txt", "tampered", { overwrite: true });
    const destination = newBackend();
    const c: PublishCase = { source, sourceBundlePath: "", manifest, destination };
    await expect(executeCase(c, await planCase(c))).rejects.toThrow(
      /b\.txt: source changed while copying/,
    );
    expect(await destination.hasAny("")).toBe(false);
  });
});

describe.each(BACKEND_KINDS)("%s: unreadable state", (kind) => {
  beforeAll(() => useBackendKind(kind));
  afterAll(removeTempBackends);
  it("treats state that is not valid UTF-8 as invalid state (a conflict)", async () => {
    const { c, destination, existing } = await olderPublication({ "report.md": "old" });
    const text = serializeDocument(existing);
    const bytes = Buffer.from(text, "utf8");
    // Corrupt one byte inside a string value: the JSON still parses if decoded leniently.
    bytes[bytes.indexOf('"distributor_version": "test"') + 24] = 0xff;
    await destination.writeFile(statePath(""), bytes, { overwrite: true });
    const plan = await planCase(c);
    expect(plan.action).toBe("fail_conflict");
    expect(plan.reason).toMatch(/utf-8|encoded/i);
  });
});
