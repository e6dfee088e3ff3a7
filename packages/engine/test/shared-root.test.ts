import {
  allManagedOutputPaths,
  findOwner,
  ownerScope,
  parseSharedRootState,
} from "@distributor/state";
import { type StorageBackend, StorageError, statePath } from "@distributor/storage";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  BACKEND_KINDS,
  CREATED,
  EARLIER,
  executeCase,
  exists,
  manifestFor,
  newBackend,
  type PublishCase,
  planCase,
  readText,
  removeTempBackends,
  sharedRootWithOther,
  singleOwnerState,
  useBackendKind,
  withCurrentOwner,
  writeSourceBundle,
  writeStateWithOutputs,
} from "../src/testing/fixtures.js";

async function sharedCase(options: { includeCurrent: boolean; files?: Record<string, string> }) {
  const source = newBackend();
  const manifest = await writeSourceBundle(
    source,
    "bundle",
    options.files ?? { "report.md": "# Report\nNew.\n" },
  );
  const destination = newBackend();
  let existing = sharedRootWithOther();
  if (options.includeCurrent) existing = withCurrentOwner(existing, manifest);
  await writeStateWithOutputs(destination, "bundle", existing);
  const c: PublishCase = {
    source,
    sourceBundlePath: "bundle",
    manifest,
    destination,
    stateMode: "shared_root",
  };
  return { c, destination, existing };
}

async function readShared(backend: StorageBackend, bundlePath = "bundle") {
  return parseSharedRootState(await readText(backend, statePath(bundlePath)));
}

const paths = (outputs: { path: string }[]) => outputs.map((o) => o.path).join(",");

describe.each(BACKEND_KINDS)("%s: shared-root planning", (kind) => {
  beforeAll(() => useBackendKind(kind));
  afterAll(removeTempBackends);
  it("TestBuildSharedRootTreatsAbsentOwnerAsPublishable", async () => {
    const { c } = await sharedCase({ includeCurrent: false, files: { "report.md": "# Report\n" } });
    const plan = await planCase(c);
    expect(plan.action).toBe("publish_new");
    expect(plan.ownerScope).toEqual(ownerScope("reports", "archive"));
    expect(plan.outputs).toHaveLength(1);
    expect(plan.deletes).toEqual([]);
    expect(plan.writes.map((write) => [write.output.path, write.overwrite])).toEqual([
      ["report.md", false],
    ]);
    expect(plan.nextState?.outputs.map((o) => o.path)).toEqual(["other/report.md", "report.md"]);
  });

  it("TestBuildSharedRootReplaceDeletesOnlyCurrentOwnerOmittedOutputs", async () => {
    const { c } = await sharedCase({ includeCurrent: true });
    const plan = await planCase(c);
    expect(plan.action).toBe("replace_older");
    expect(plan.deletes).toEqual(["old.md"]);
    expect(plan.writes.map((write) => [write.output.path, write.overwrite])).toEqual([
      ["report.md", true],
    ]);
    expect(paths(plan.nextState?.outputs ?? [])).toBe("other/report.md,report.md");
  });

  it("TestBuildSharedRootMergeRetainsCurrentOwnerOmittedOutputs", async () => {
    const { c } = await sharedCase({ includeCurrent: true });
    c.reconciliation = "merge";
    const plan = await planCase(c);
    expect(plan.deletes).toEqual([]);
    expect(paths(plan.nextState?.outputs ?? [])).toBe("other/report.md,old.md,report.md");
  });

  it("TestBuildSharedRootRejectsOtherOwnerPathConflict", async () => {
    const source = newBackend();
    const manifest = await writeSourceBundle(source, "bundle", { "report.md": "# Report\n" });
    const destination = newBackend();
    const existing = sharedRootWithOther();
    const [first] = existing.outputs;
    if (first) first.path = "report.md";
    await writeStateWithOutputs(destination, "bundle", existing);
    const plan = await planCase({
      source,
      sourceBundlePath: "bundle",
      manifest,
      destination,
      stateMode: "shared_root",
    });
    expect(plan.action).toBe("fail_conflict");
    expect(plan.reason).toBe("destination output path report.md is owned by other/archive");
  });

  it("TestBuildSharedRootRejectsUnmanagedPathCollision", async () => {
    const { c, destination } = await sharedCase({
      includeCurrent: false,
      files: { "report.md": "# Report\n" },
    });
    await destination.writeFile("bundle/report.md", "unmanaged");
    const plan = await planCase(c);
    expect(plan.action).toBe("fail_unmanaged");
    expect(plan.reason).toBe(
      "destination output path report.md exists but is not managed by destination state",
    );
  });

  it("finds the same collisions path by path when the root is too full to list", async () => {
    const { c, destination } = await sharedCase({
      includeCurrent: false,
      files: { "report.md": "# Report\n", "sub/data.txt": "data" },
    });
    await destination.writeFile("bundle/report.md", "unmanaged");
    await destination.writeFile("bundle/sub", "a file where a directory is needed");
    for (let index = 0; index < 5; index++) {
      await destination.writeFile(`bundle/other-${index}.txt`, "someone else's");
    }
    const listed = await planCase(c);
    const statted = await planCase({ ...c, walkLimit: 3 });
    expect(statted.action).toBe("fail_unmanaged");
    expect({ action: statted.action, reason: statted.reason }).toEqual({
      action: listed.action,
      reason: listed.reason,
    });
  });

  it("plans path by path when the root cannot be listed (an unreadable directory elsewhere)", async () => {
    const { c, destination } = await sharedCase({
      includeCurrent: false,
      files: { "report.md": "# Report\n" },
    });
    await destination.writeFile("bundle/report.md", "unmanaged");
    const expected = await planCase(c);
    // Someone else's directory below the root that this user may not read fails the listing.
    const unreadable = new Proxy(destination, {
      get(target, property, receiver) {
        if (property === "walk") {
          // Listing the root's top level works; descending into the private directory fails.
          return async (prefix: string, options: { recursive?: boolean; limit: number }) => {
            if (!options.recursive) return target.walk(prefix, options);
            throw new StorageError({
              kind: "permission",
              operation: "walk",
              backend: target.name,
              path: "bundle/private",
              detail: "permission denied (EACCES)",
            });
          };
        }
        const value = Reflect.get(target, property, receiver);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const plan = await planCase({ ...c, destination: unreadable });
    expect({ action: plan.action, reason: plan.reason }).toEqual({
      action: expected.action,
      reason: expected.reason,
    });
    expect(plan.action).toBe("fail_unmanaged");
  });

  it("refuses a single-owner state of another owner as a conflict", async () => {
    const source = newBackend();
    const manifest = await writeSourceBundle(source, "", { "report.md": "# Report\n" });
    const destination = newBackend();
    await writeStateWithOutputs(
      destination,
      "",
      singleOwnerState(manifestFor({ "x.md": "x" }), { pipelineId: "other" }),
    );
    const plan = await planCase({
      source,
      sourceBundlePath: "",
      manifest,
      destination,
      stateMode: "shared_root",
    });
    expect(plan.action).toBe("fail_conflict");
  });
});

describe.each(BACKEND_KINDS)("%s: shared-root execution", (kind) => {
  beforeAll(() => useBackendKind(kind));
  afterAll(removeTempBackends);
  it("TestExecuteSharedRootPublishesOwnerAndPreservesOtherOwners", async () => {
    const { c, destination } = await sharedCase({
      includeCurrent: false,
      files: { "report.md": "# Report\n" },
    });
    await executeCase(c, await planCase(c));
    expect(await readText(destination, "bundle/report.md")).toBe("# Report\n");
    expect(await readText(destination, "bundle/other/report.md")).toBe("old");
    const state = await readShared(destination);
    expect(state.owners).toHaveLength(2);
    expect(state.state.mode).toBe("shared_root");
    expect(findOwner(state, ownerScope("other", "archive"))).toBeDefined();
    expect(findOwner(state, ownerScope("reports", "archive"))).toBeDefined();
    expect(allManagedOutputPaths(state).join(",")).toBe("other/report.md,report.md");
  });

  it("TestExecuteSharedRootReplaceDeletesOnlyCurrentOwnerOmittedOutputs", async () => {
    const { c, destination, existing } = await sharedCase({ includeCurrent: true });
    await executeCase(c, await planCase(c));
    expect(await readText(destination, "bundle/report.md")).toBe("# Report\nNew.\n");
    expect(await exists(destination, "bundle/old.md")).toBe(false);
    expect(await readText(destination, "bundle/other/report.md")).toBe("old");
    const state = await readShared(destination);
    expect(allManagedOutputPaths(state).join(",")).toBe("other/report.md,report.md");
    expect(state.createdAt).toEqual(existing.createdAt);
    const report = state.outputs.find((o) => o.path === "report.md");
    const before = existing.outputs.find(
      (o) => o.path === "report.md" && o.owner.pipelineId === "reports",
    );
    expect(report?.createdAt).toEqual(before?.createdAt);
    expect(report?.updatedAt.getTime()).toBeGreaterThan(before?.updatedAt.getTime() ?? 0);
    // The other owner's record is carried over untouched.
    expect(state.outputs.find((o) => o.path === "other/report.md")).toEqual(existing.outputs[0]);
  });

  it("TestExecuteSharedRootMergeRetainsCurrentOwnerOmittedOutputs", async () => {
    const { c, destination } = await sharedCase({ includeCurrent: true });
    c.reconciliation = "merge";
    await executeCase(c, await planCase(c));
    expect(await readText(destination, "bundle/report.md")).toBe("# Report\nNew.\n");
    expect(await readText(destination, "bundle/old.md")).toBe("old");
    expect(await readText(destination, "bundle/other/report.md")).toBe("old");
    const state = await readShared(destination);
    // Merge keeps existing records in place (the fixture's older manifest lists old.md first).
    expect(allManagedOutputPaths(state).join(",")).toBe("other/report.md,old.md,report.md");
  });

  it("TestExecuteSharedRootForceReplaceDeletesOnlyBundlePath", async () => {
    const source = newBackend();
    const manifest = await writeSourceBundle(source, "bundle", { "report.md": "# Report\n" });
    const destination = newBackend({
      files: {
        "bundle/unmanaged.txt": "unmanaged",
        "bundle/nested/old.txt": "old",
        "bundle-sibling/keep.txt": "keep",
      },
    });
    const c: PublishCase = {
      source,
      sourceBundlePath: "bundle",
      manifest,
      destination,
      stateMode: "shared_root",
      force: true,
    };
    const plan = await planCase(c);
    expect(plan.action).toBe("force_replace");
    await executeCase(c, plan);
    expect(await readText(destination, "bundle/report.md")).toBe("# Report\n");
    expect(await exists(destination, "bundle/unmanaged.txt")).toBe(false);
    expect(await exists(destination, "bundle/nested/old.txt")).toBe(false);
    expect(await readText(destination, "bundle-sibling/keep.txt")).toBe("keep");
    expect((await readShared(destination)).owners).toHaveLength(1);
  });

  for (const mode of ["replace", "merge"] as const) {
    it(`migrates compatible single-owner state to schema 3 (${mode})`, async () => {
      const source = newBackend();
      const manifest = await writeSourceBundle(source, "", { "report.md": "# Report\nNew.\n" });
      const destination = newBackend();
      const older = manifestFor(
        { "report.md": "old", "gone.md": "old" },
        { created: new Date(CREATED.getTime() - 3_600_000) },
      );
      await writeStateWithOutputs(destination, "", singleOwnerState(older));
      const c: PublishCase = {
        source,
        sourceBundlePath: "",
        manifest,
        destination,
        stateMode: "shared_root",
        reconciliation: mode,
      };
      const plan = await planCase(c);
      expect(plan.action).toBe("replace_older");
      await executeCase(c, plan);
      const state = await readShared(destination, "");
      expect(state.schemaVersion).toBe(3);
      expect(state.createdAt).toEqual(EARLIER);
      expect(state.owners.map((o) => `${o.scope.pipelineId}/${o.scope.destinationId}`)).toEqual([
        "reports/archive",
      ]);
      const expected = mode === "merge" ? "gone.md,report.md" : "report.md";
      expect(allManagedOutputPaths(state).sort().join(",")).toBe(expected);
      expect(await exists(destination, "gone.md")).toBe(mode === "merge");
    });
  }
});
