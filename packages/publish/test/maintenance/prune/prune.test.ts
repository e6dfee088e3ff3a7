import { readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { fileDigest } from "@distributor/bundle";
import {
  allManagedOutputPaths,
  isSharedRootState,
  type OwnerScope,
  type SharedRootState,
  type SingleOwnerState,
} from "@distributor/state";
import type { StorageBackend } from "@distributor/storage";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Config, PrunePolicy } from "../../../src/config/types.js";
import { errorCode, isPruneError, type PruneError } from "../../../src/errors.js";
import { planDestinationPrune, prune } from "../../../src/maintenance/prune/prune.js";
import type { PruneOptions, PruneReport } from "../../../src/maintenance/prune/types.js";
import {
  ARCHIVE_OWNER,
  DestinationFixture,
  faultyLocalRegistry,
  HTML_OWNER,
  injectedFailure,
  paths,
  REPORT,
  recordedPaths,
  SOURCE_MANIFEST,
} from "../../support/helpers.js";

const NOW = new Date("2026-06-08T12:00:00Z");
const HOUR = 60 * 60 * 1000;
const hoursAgo = (hours: number): Date => new Date(NOW.getTime() - hours * HOUR);

interface OutputSpec {
  path: string;
  updatedAt: Date;
  owner?: OwnerScope;
}

function singleOwnerState(
  outputs: OutputSpec[],
  owner: OwnerScope = ARCHIVE_OWNER,
): SingleOwnerState {
  const publishedAt = hoursAgo(96);
  return {
    schemaVersion: 2,
    distributorVersion: "test",
    pipelineId: owner.pipelineId,
    destinationId: owner.destinationId,
    publishedAt,
    createdAt: publishedAt,
    updatedAt: publishedAt,
    state: { mode: "single_owner" },
    reconciliation: { mode: "replace" },
    source: { manifest: SOURCE_MANIFEST },
    outputs: outputs.map((output) => ({
      path: output.path,
      kind: "source",
      sourcePath: "report.md",
      ...fileDigest(REPORT),
      createdAt: hoursAgo(96),
      updatedAt: output.updatedAt,
    })),
  };
}

function sharedRootState(outputs: OutputSpec[]): SharedRootState {
  return {
    schemaVersion: 3,
    distributorVersion: "test",
    createdAt: hoursAgo(96),
    updatedAt: hoursAgo(24),
    state: { mode: "shared_root" },
    owners: [ARCHIVE_OWNER, HTML_OWNER].map((scope) => ({
      scope,
      reconciliation: { mode: "replace" as const },
      source: { manifest: SOURCE_MANIFEST },
    })),
    outputs: outputs.map((output) => ({
      path: output.path,
      kind: "source" as const,
      sourcePath: "report.md",
      ...fileDigest(REPORT),
      owner: output.owner ?? ARCHIVE_OWNER,
      sourceId: SOURCE_MANIFEST.id,
      sourceDigest: SOURCE_MANIFEST.digest,
      sourceCreated: SOURCE_MANIFEST.created,
      createdAt: hoursAgo(96),
      updatedAt: output.updatedAt,
    })),
  };
}

/** The reference fixture: old.txt updated 72h ago, fresh.txt 24h ago. */
const referenceSingleOwner = (): SingleOwnerState =>
  singleOwnerState([
    { path: "old.txt", updatedAt: hoursAgo(72) },
    { path: "fresh.txt", updatedAt: hoursAgo(24) },
  ]);

/** The reference shared-root fixture: archive.txt for reports/archive, html.txt for reports/html. */
const referenceSharedRoot = (): SharedRootState =>
  sharedRootState([
    { path: "archive.txt", updatedAt: hoursAgo(72), owner: ARCHIVE_OWNER },
    { path: "html.txt", updatedAt: hoursAgo(72), owner: HTML_OWNER },
  ]);

let destination: DestinationFixture;

beforeEach(async () => {
  destination = await DestinationFixture.create("distributor-prune-");
});

afterEach(() => destination.remove());

function retentionYaml(policy: { olderThan?: string; keepLatest?: number; enabled?: boolean }) {
  const lines = [`            enabled: ${policy.enabled ?? true}`];
  if (policy.olderThan !== undefined) lines.push(`            older_than: ${policy.olderThan}`);
  if (policy.keepLatest !== undefined) lines.push(`            keep_latest: ${policy.keepLatest}`);
  return ["        retention:", "          prune:", ...lines].join("\n");
}

function configWith(retention: string, stateMode = "single_owner"): Config {
  return destination.config(stateMode, retention);
}

function pruneOptions(config: Config, overrides: Partial<PruneOptions> = {}): PruneOptions {
  return {
    config,
    pipelineId: "reports",
    destinationId: "archive",
    now: () => NOW,
    ...overrides,
  };
}

/** Fails `deletePaths` of one path, or every state write, for fault injection only. */
function faultyRegistry(faults: { deleteFails?: string; writeFails?: boolean }) {
  return faultyLocalRegistry(
    (inner) =>
      ({
        ...(faults.writeFails
          ? {
              // The state rewrite fails; the lease beside it is written as usual.
              writeFile: async (path, data, options) => {
                if (path === ".distributor.json") throw injectedFailure("write file", path);
                return inner.writeFile(path, data, options);
              },
            }
          : {}),
        deletePaths: async (bundlePath, outputPaths, options) => {
          const failing = outputPaths.find((path) => path === faults.deleteFails);
          if (failing !== undefined) throw injectedFailure("delete managed outputs", failing);
          return inner.deletePaths(bundlePath, outputPaths, options);
        },
      }) satisfies Partial<StorageBackend>,
  );
}

async function expectPruneError(promise: Promise<unknown>): Promise<PruneError> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  if (!isPruneError(error)) throw new Error(`expected a PruneError, got ${String(error)}`);
  return error;
}

const policy = (fields: Partial<PrunePolicy>): PrunePolicy => ({ enabled: true, ...fields });

describe("planDestinationPrune", () => {
  it("TestPlanPruneDisabledPolicy: plans and checks nothing", () => {
    const plan = planDestinationPrune(
      referenceSingleOwner(),
      { enabled: false },
      {
        pipelineId: "reports",
        destinationId: "archive",
        now: NOW,
      },
    );
    expect(plan).toEqual({
      pipeline_id: "reports",
      destination_id: "archive",
      owner_scope: { pipeline_id: "reports", destination_id: "archive" },
      enabled: false,
      checked_count: 0,
      pruned_outputs: [],
      preserved_outputs: [],
    });
  });

  it("TestPlanPruneSingleOwnerOutputs: prunes outputs older than older_than", () => {
    const plan = planDestinationPrune(referenceSingleOwner(), policy({ olderThanMs: 48 * HOUR }), {
      pipelineId: "reports",
      destinationId: "archive",
      now: NOW,
    });
    expect(plan.checked_count).toBe(2);
    expect(plan.pruned_outputs).toEqual([{ path: "old.txt", updated_at: "2026-06-05T12:00:00Z" }]);
    expect(plan.preserved_outputs).toEqual([
      { path: "fresh.txt", updated_at: "2026-06-07T12:00:00Z" },
    ]);
  });

  it("TestPlanPruneSharedRootCurrentOwnerOnly: considers only the selected owner", () => {
    const plan = planDestinationPrune(referenceSharedRoot(), policy({ keepLatest: 0 }), {
      pipelineId: "reports",
      destinationId: "archive",
      now: NOW,
    });
    expect(plan.checked_count).toBe(1);
    expect(plan.pruned_outputs).toEqual([
      {
        path: "archive.txt",
        updated_at: "2026-06-05T12:00:00Z",
        owner: { pipeline_id: "reports", destination_id: "archive" },
      },
    ]);
    expect(plan.preserved_outputs).toEqual([]);
  });

  it("refuses single-owner state of another owner", () => {
    const foreign = singleOwnerState([{ path: "old.txt", updatedAt: hoursAgo(72) }], {
      pipelineId: "reports",
      destinationId: "other",
    });
    expect(() =>
      planDestinationPrune(foreign, policy({ keepLatest: 0 }), {
        pipelineId: "reports",
        destinationId: "archive",
        now: NOW,
      }),
    ).toThrow("state owner is reports/other, not reports/archive");
  });

  it("applies keep_latest before older_than", () => {
    const state = singleOwnerState([
      { path: "a.txt", updatedAt: hoursAgo(100) },
      { path: "b.txt", updatedAt: hoursAgo(90) },
      { path: "c.txt", updatedAt: hoursAgo(80) },
      { path: "d.txt", updatedAt: hoursAgo(1) },
    ]);
    const plan = planDestinationPrune(state, policy({ keepLatest: 2, olderThanMs: 48 * HOUR }), {
      pipelineId: "reports",
      destinationId: "archive",
      now: NOW,
    });
    // d and c are the two newest; of a and b, both are older than 48h.
    expect(paths(plan.preserved_outputs)).toBe("d.txt,c.txt");
    expect(paths(plan.pruned_outputs)).toBe("a.txt,b.txt");
  });
});

describe("prune", () => {
  it("TestPruneDryRunReportsPlannedDeletesWithoutDeletingOrRewritingState", async () => {
    const original = await destination.writeDestination(referenceSingleOwner());
    await destination.writeFiles({ "unmanaged.txt": "keep" });
    const config = configWith(retentionYaml({ olderThan: "48h" }));

    const report = await prune(pruneOptions(config, { dryRun: true }));

    expect(report.would_change).toBe(true);
    expect(report.state_changed).toBe(false);
    expect(report.deleted_outputs).toEqual([]);
    expect(paths(report.planned_outputs)).toBe("old.txt");
    expect(await destination.fileText("old.txt")).toBe("managed");
    expect(await destination.fileText("fresh.txt")).toBe("managed");
    expect(await destination.fileText("unmanaged.txt")).toBe("keep");
    expect(await destination.stateText()).toBe(original);
  });

  it("TestPruneApplyDeletesOnlyManagedOutputsAndUpdatesState", async () => {
    await destination.writeDestination(referenceSingleOwner());
    await destination.writeFiles({ "unmanaged.txt": "keep" });
    const config = configWith(retentionYaml({ olderThan: "48h" }));

    const report = await prune(pruneOptions(config, { dryRun: false }));

    expect(report.state_changed).toBe(true);
    expect(report.would_change).toBe(false);
    expect(paths(report.deleted_outputs)).toBe("old.txt");
    expect(await destination.exists("old.txt")).toBe(false);
    expect(await destination.fileText("fresh.txt")).toBe("managed");
    expect(await destination.fileText("unmanaged.txt")).toBe("keep");
    const state = await destination.readState();
    expect(recordedPaths(state)).toBe("fresh.txt");
    expect(state.updatedAt).toEqual(NOW);
    // Only the record set and the state timestamp change.
    expect(state).toMatchObject({ publishedAt: hoursAgo(96), createdAt: hoursAgo(96) });
  });

  it("leaves alone a planned output that was missing when the prune read its version", async () => {
    await destination.writeDestination(referenceSingleOwner());
    await rm(join(destination.root, "old.txt"));
    const config = configWith(retentionYaml({ olderThan: "48h" }));
    // Once the state no longer records old.txt, another run (one that took over a stalled
    // prune's lease) writes it again: an unfenced delete would remove its bytes.
    const backends = faultyLocalRegistry((inner) => ({
      writeFile: async (path, data, options) => {
        const result = await inner.writeFile(path, data, options);
        if (path === ".distributor.json") await inner.writeFile("old.txt", "theirs");
        return result;
      },
    }));

    const report = await prune(pruneOptions(config, { dryRun: false, backends }));

    expect(paths(report.deleted_outputs)).toBe("old.txt");
    expect(await destination.fileText("old.txt")).toBe("theirs");
    expect(recordedPaths(await destination.readState())).toBe("fresh.txt");
  });

  it("TestPruneApplyPreservesStateForFailedDeletes", async () => {
    await destination.writeDestination(referenceSingleOwner());
    const config = configWith(retentionYaml({ keepLatest: 0 }));

    const error = await expectPruneError(
      prune(
        pruneOptions(config, {
          dryRun: false,
          backends: faultyRegistry({ deleteFails: "fresh.txt" }),
        }),
      ),
    );

    expect(error.code).toBe("storage_permission");
    expect(errorCode(error)).toBe("storage_permission");
    expect(error.message).toContain("fresh.txt");
    expect(error.report.failed_output).toEqual({
      path: "fresh.txt",
      updated_at: "2026-06-07T12:00:00Z",
    });
    expect(paths(error.report.deleted_outputs)).toBe("old.txt");
    expect(paths(error.report.planned_outputs)).toBe("old.txt,fresh.txt");
    // The commit protocol writes the state first, then deletes (docs/design/commit-protocol.md): the record is gone,
    // and the file that could not be deleted stays journaled with the abandoned lease.
    expect(error.report.state_changed).toBe(true);
    expect(await destination.exists("old.txt")).toBe(false);
    expect(await destination.fileText("fresh.txt")).toBe("managed");
    const state = await destination.readState();
    expect(recordedPaths(state)).toBe("");
    expect(state.updatedAt).toEqual(NOW);
    expect(await destination.exists(".distributor.lease.json")).toBe(true);

    // The next run at this destination completes the prune from the journal.
    const next = await prune(pruneOptions(config, { dryRun: false }));
    expect(next.planned_outputs).toEqual([]);
    expect(await destination.exists("fresh.txt")).toBe(false);
    expect(await destination.exists(".distributor.lease.json")).toBe(false);
  });

  it("TestPruneSharedRootPreservesOtherOwnersWhenScopedToCurrentOwner", async () => {
    await destination.writeDestination(referenceSharedRoot(), "old");
    await destination.writeFiles({ "unmanaged.txt": "keep" });
    const config = configWith(retentionYaml({ keepLatest: 0 }), "shared_root");

    const report = await prune(pruneOptions(config, { dryRun: false }));

    expect(paths(report.deleted_outputs)).toBe("archive.txt");
    expect(report.checked_count).toBe(1);
    expect(await destination.exists("archive.txt")).toBe(false);
    expect(await destination.fileText("html.txt")).toBe("old");
    expect(await destination.fileText("unmanaged.txt")).toBe("keep");
    const state = await destination.readState();
    if (!isSharedRootState(state)) throw new Error("expected shared-root state");
    expect(allManagedOutputPaths(state)).toEqual(["html.txt"]);
  });

  it("leaves other owners' files and records untouched, including their state fields", async () => {
    const document = sharedRootState([
      { path: "a/archive-old.txt", updatedAt: hoursAgo(300), owner: ARCHIVE_OWNER },
      { path: "a/html-old.txt", updatedAt: hoursAgo(400), owner: HTML_OWNER },
      { path: "archive-new.txt", updatedAt: hoursAgo(1), owner: ARCHIVE_OWNER },
      { path: "html-new.txt", updatedAt: hoursAgo(1), owner: HTML_OWNER },
    ]);
    await destination.writeDestination(document);
    const config = configWith(retentionYaml({ olderThan: "24h" }), "shared_root");

    const report = await prune(pruneOptions(config, { dryRun: false }));

    expect(paths(report.deleted_outputs)).toBe("a/archive-old.txt");
    expect(paths(report.preserved_outputs)).toBe("archive-new.txt");
    expect(await destination.exists("a/archive-old.txt")).toBe(false);
    expect(await destination.fileText("a/html-old.txt")).toBe("managed");
    expect(await destination.fileText("html-new.txt")).toBe("managed");
    const state = await destination.readState();
    if (!isSharedRootState(state)) throw new Error("expected shared-root state");
    const htmlRecords = document.outputs.filter((output) => output.owner.destinationId === "html");
    expect(state.outputs.filter((output) => output.owner.destinationId === "html")).toEqual(
      htmlRecords,
    );
    expect(state.owners).toEqual(document.owners);
    expect(state.createdAt).toEqual(document.createdAt);
    expect(state.updatedAt).toEqual(NOW);
  });

  it("combines keep_latest and older_than when applying", async () => {
    await destination.writeDestination(
      singleOwnerState([
        { path: "a.txt", updatedAt: hoursAgo(100) },
        { path: "b.txt", updatedAt: hoursAgo(90) },
        { path: "c.txt", updatedAt: hoursAgo(80) },
        { path: "d.txt", updatedAt: hoursAgo(30) },
        { path: "e.txt", updatedAt: hoursAgo(1) },
      ]),
    );
    // The two newest (e, d) are kept whatever their age; of the rest only those past 85h go.
    const config = configWith(retentionYaml({ keepLatest: 2, olderThan: "85h" }));

    const report = await prune(pruneOptions(config, { dryRun: false }));

    expect(paths(report.deleted_outputs)).toBe("a.txt,b.txt");
    expect(paths(report.preserved_outputs)).toBe("e.txt,d.txt,c.txt");
    expect(recordedPaths(await destination.readState())).toBe("c.txt,d.txt,e.txt");
    expect(await destination.exists("a.txt")).toBe(false);
    expect(await destination.exists("b.txt")).toBe(false);
    expect(await destination.exists("c.txt")).toBe(true);
  });

  it("is idempotent: a second apply is unchanged and leaves the state byte for byte", async () => {
    await destination.writeDestination(referenceSingleOwner());
    const config = configWith(retentionYaml({ olderThan: "48h" }));
    const first = await prune(pruneOptions(config, { dryRun: false }));
    expect(first).toMatchObject({ state_changed: true });
    const afterFirst = await destination.stateText();

    const second = await prune(
      pruneOptions(config, { dryRun: false, now: () => new Date(NOW.getTime() + HOUR) }),
    );

    expect(second).toMatchObject({ state_changed: false, would_change: false });
    expect(second.planned_outputs).toEqual([]);
    expect(second.deleted_outputs).toEqual([]);
    expect(second.state_changed).toBe(false);
    expect(await destination.stateText()).toBe(afterFirst);
  });

  it("records the prune before deleting; a first delete that fails leaves every file journaled", async () => {
    await destination.writeDestination(referenceSingleOwner());
    const config = configWith(retentionYaml({ keepLatest: 0 }));

    const error = await expectPruneError(
      prune(
        pruneOptions(config, {
          dryRun: false,
          backends: faultyRegistry({ deleteFails: "old.txt" }),
        }),
      ),
    );

    expect(error.report.failed_output?.path).toBe("old.txt");
    expect(error.report.deleted_outputs).toEqual([]);
    expect(error.report.state_changed).toBe(true);
    expect(recordedPaths(await destination.readState())).toBe("");
    expect(await destination.fileText("old.txt")).toBe("managed");
    expect(await destination.fileText("fresh.txt")).toBe("managed");

    await prune(pruneOptions(config, { dryRun: false }));
    expect(await destination.exists("old.txt")).toBe(false);
    expect(await destination.exists("fresh.txt")).toBe(false);
  });

  it("keeps the failed and unattempted files journaled when a delete fails mid-prune", async () => {
    await destination.writeDestination(
      singleOwnerState([
        { path: "one.txt", updatedAt: hoursAgo(300) },
        { path: "two.txt", updatedAt: hoursAgo(200) },
        { path: "three.txt", updatedAt: hoursAgo(100) },
      ]),
    );
    const config = configWith(retentionYaml({ keepLatest: 0 }));

    const error = await expectPruneError(
      prune(
        pruneOptions(config, {
          dryRun: false,
          backends: faultyRegistry({ deleteFails: "two.txt" }),
        }),
      ),
    );

    expect(paths(error.report.planned_outputs)).toBe("one.txt,two.txt,three.txt");
    expect(paths(error.report.deleted_outputs)).toBe("one.txt");
    expect(error.report.failed_output?.path).toBe("two.txt");
    expect(await destination.exists("one.txt")).toBe(false);
    expect(await destination.fileText("two.txt")).toBe("managed");
    expect(await destination.fileText("three.txt")).toBe("managed");
    expect(recordedPaths(await destination.readState())).toBe("");
    expect(error.report).toMatchObject({ state_changed: true, checked_count: 3 });
    expect(error.report.preserved_outputs).toHaveLength(0);

    await prune(pruneOptions(config, { dryRun: false }));
    expect(await destination.exists("two.txt")).toBe(false);
    expect(await destination.exists("three.txt")).toBe(false);
  });

  it("deletes nothing when the state rewrite fails, and the next apply prunes", async () => {
    const original = await destination.writeDestination(referenceSingleOwner());
    const config = configWith(retentionYaml({ olderThan: "48h" }));

    const error = await expectPruneError(
      prune(
        pruneOptions(config, { dryRun: false, backends: faultyRegistry({ writeFails: true }) }),
      ),
    );

    expect(error.code).toBe("storage_permission");
    expect(error.message).toContain("write file");
    expect(error.report.deleted_outputs).toEqual([]);
    expect(error.report.failed_output).toBeUndefined();
    expect(error.report.state_changed).toBe(false);
    expect(await destination.fileText("old.txt")).toBe("managed");
    expect(await destination.stateText()).toBe(original);

    const next = await prune(pruneOptions(config, { dryRun: false }));
    expect(paths(next.deleted_outputs)).toBe("old.txt");
    expect(await destination.exists("old.txt")).toBe(false);
    expect(await destination.exists(".distributor.lease.json")).toBe(false);
  });

  it("stops at an abort between deletes; the next apply deletes the rest", async () => {
    await destination.writeDestination(
      singleOwnerState([
        { path: "one.txt", updatedAt: hoursAgo(300) },
        { path: "two.txt", updatedAt: hoursAgo(200) },
      ]),
    );
    const config = configWith(retentionYaml({ keepLatest: 0 }));
    const controller = new AbortController();

    const error = await expectPruneError(
      prune(
        pruneOptions(config, {
          dryRun: false,
          signal: controller.signal,
          onEvent: () => controller.abort(),
        }),
      ),
    );

    expect(error.code).toBe("aborted");
    expect(paths(error.report.deleted_outputs)).toBe("one.txt");
    expect(error.report.failed_output).toBeUndefined();
    expect(await destination.fileText("two.txt")).toBe("managed");
    expect(recordedPaths(await destination.readState())).toBe("");

    await prune(pruneOptions(config, { dryRun: false }));
    expect(await destination.exists("two.txt")).toBe(false);
  });

  it("is a dry run unless dryRun is false", async () => {
    const original = await destination.writeDestination(referenceSingleOwner());
    const config = configWith(retentionYaml({ keepLatest: 0 }));

    const report = await prune(pruneOptions(config));

    expect(report.dry_run).toBe(true);
    expect(report).toMatchObject({ state_changed: false, would_change: true });
    expect(paths(report.planned_outputs)).toBe("old.txt,fresh.txt");
    expect(await destination.exists("old.txt")).toBe(true);
    expect(await destination.stateText()).toBe(original);
  });

  it("plans and deletes nothing when the policy is disabled", async () => {
    const original = await destination.writeDestination(referenceSingleOwner());
    const config = configWith(retentionYaml({ enabled: false, keepLatest: 0 }));

    const report = await prune(pruneOptions(config, { dryRun: false }));

    expect(report).toMatchObject({
      enabled: false,
      checked_count: 0,
      planned_outputs: [],
      state_changed: false,
    });
    expect(report).toMatchObject({ state_changed: false, would_change: false });
    expect(await destination.stateText()).toBe(original);
    expect(await destination.exists("old.txt")).toBe(true);
  });

  it("deletes every planned output but keeps the live publication, .distributor.json and unmanaged files", async () => {
    // report.md is what the recorded source gives under this configuration: the publication in
    // force, older than the cutoff and still never a candidate.
    await destination.writeDestination(
      singleOwnerState([
        { path: "report.md", updatedAt: hoursAgo(3) },
        { path: "retired.txt", updatedAt: hoursAgo(2) },
      ]),
    );
    await destination.writeFiles({ "extra.txt": "unmanaged" });
    const config = configWith(retentionYaml({ olderThan: "1h", keepLatest: 0 }));

    const report = await prune(pruneOptions(config, { dryRun: false }));

    expect(report).toMatchObject({ state_changed: true, checked_count: 1, dry_run: false });
    expect(paths(report.deleted_outputs)).toBe("retired.txt");
    expect((await readdir(destination.root)).sort()).toEqual([
      ".distributor.json",
      "extra.txt",
      "report.md",
    ]);
    expect(recordedPaths(await destination.readState())).toBe("report.md");
  });

  it("removes directories the deletes leave empty, never the root", async () => {
    await destination.writeDestination(
      singleOwnerState([
        { path: "2026/05/old.txt", updatedAt: hoursAgo(300) },
        { path: "2026/06/new.txt", updatedAt: hoursAgo(1) },
      ]),
    );
    const config = configWith(retentionYaml({ olderThan: "48h" }));

    await prune(pruneOptions(config, { dryRun: false }));

    expect(await destination.exists("2026/05")).toBe(false);
    expect(await destination.fileText("2026/06/new.txt")).toBe("managed");
  });

  it("treats an output already gone as deleted and drops its record", async () => {
    await destination.writeDestination(referenceSingleOwner());
    await rm(join(destination.root, "old.txt"));
    const config = configWith(retentionYaml({ olderThan: "48h" }));

    const report = await prune(pruneOptions(config, { dryRun: false }));

    expect(paths(report.deleted_outputs)).toBe("old.txt");
    expect(recordedPaths(await destination.readState())).toBe("fresh.txt");
  });

  it("refuses single-owner state of another owner without deleting anything", async () => {
    const original = await destination.writeDestination(
      singleOwnerState([{ path: "old.txt", updatedAt: hoursAgo(72) }], {
        pipelineId: "reports",
        destinationId: "other",
      }),
    );
    const config = configWith(retentionYaml({ keepLatest: 0 }));

    await expect(prune(pruneOptions(config, { dryRun: false }))).rejects.toThrow(
      "state owner is reports/other, not reports/archive",
    );
    expect(await destination.stateText()).toBe(original);
    expect(await destination.exists("old.txt")).toBe(true);
  });

  it("fails on invalid state and leaves it byte for byte", async () => {
    const invalid = '{"schema_version":2,"pipeline_id":"reports"}';
    await destination.writeFiles({ ".distributor.json": invalid, "old.txt": "managed" });
    const config = configWith(retentionYaml({ keepLatest: 0 }));

    await expect(prune(pruneOptions(config, { dryRun: false }))).rejects.toMatchObject({
      name: "StateError",
      code: "state_invalid",
    });
    expect(await destination.stateText()).toBe(invalid);
    expect(await destination.exists("old.txt")).toBe(true);
  });

  it("fails when the destination root has no state file", async () => {
    await destination.writeFiles({ "old.txt": "unmanaged" });
    const config = configWith(retentionYaml({ keepLatest: 0 }));

    await expect(prune(pruneOptions(config, { dryRun: false }))).rejects.toMatchObject({
      code: "state_not_found",
      message: expect.stringContaining(".distributor.json"),
    });
    expect(await destination.fileText("old.txt")).toBe("unmanaged");
  });

  it("names unknown pipelines and destinations", async () => {
    await destination.writeDestination(referenceSingleOwner());
    const config = configWith(retentionYaml({ keepLatest: 0 }));

    await expect(prune(pruneOptions(config, { pipelineId: "nope" }))).rejects.toThrow(
      'pipeline "nope" not found',
    );
    await expect(prune(pruneOptions(config, { destinationId: "nope" }))).rejects.toThrow(
      "destination nope not found",
    );
  });

  it("reports exactly the reference JSON fields, plus the unit and the (empty) bundle lists and warnings", async () => {
    await destination.writeDestination(referenceSharedRoot());
    const config = configWith(retentionYaml({ keepLatest: 0 }), "shared_root");

    const report: PruneReport = await prune(pruneOptions(config, { dryRun: true }));

    expect(JSON.parse(JSON.stringify(report))).toEqual({
      pipeline_id: "reports",
      destination_id: "archive",
      backend: "local",
      root_path: destination.root,
      owner_scope: { pipeline_id: "reports", destination_id: "archive" },
      enabled: true,
      unit: "outputs",
      checked_count: 1,
      planned_outputs: [
        {
          path: "archive.txt",
          updated_at: "2026-06-05T12:00:00Z",
          owner: { pipeline_id: "reports", destination_id: "archive" },
        },
      ],
      deleted_outputs: [],
      preserved_outputs: [],
      planned_bundles: [],
      deleted_bundles: [],
      preserved_bundles: [],
      state_changed: false,
      warnings: [],
      would_change: true,
      dry_run: true,
    });
  });
});
