import { mkdir, readFile, rm, stat, truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileDigest, serializeManifest } from "@distributor/bundle";
import { MAX_STATE_BYTES } from "@distributor/engine";
import {
  isSharedRootState,
  type OwnerScope,
  type SharedRootState,
  type SingleOwnerState,
  type StateDocument,
  serializeDocument,
} from "@distributor/state";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { CONFIG_DEFAULTS } from "../../src/config/defaults.js";
import {
  type ReconcileStateOptions,
  reconcileState,
} from "../../src/maintenance/reconcile-state.js";
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
  SUMMARY,
} from "../support/helpers.js";

const NOW = new Date("2026-06-08T12:00:00Z");
const CREATED = new Date("2026-05-30T11:12:00Z");

const HTML = "<html>report</html>\n";

/** Like the reference's destination state fixture: report.md and summary.txt of reports/archive. */
function singleOwnerState(owner: OwnerScope = ARCHIVE_OWNER): SingleOwnerState {
  return {
    schemaVersion: 2,
    distributorVersion: "test",
    pipelineId: owner.pipelineId,
    destinationId: owner.destinationId,
    publishedAt: CREATED,
    createdAt: CREATED,
    updatedAt: CREATED,
    state: { mode: "single_owner" },
    reconciliation: { mode: "replace" },
    source: { manifest: SOURCE_MANIFEST },
    outputs: [
      { path: "report.md", kind: "source", sourcePath: "report.md", ...fileDigest(REPORT) },
      { path: "summary.txt", kind: "source", sourcePath: "summary.txt", ...fileDigest(SUMMARY) },
    ].map((output) => ({
      ...output,
      kind: "source" as const,
      createdAt: CREATED,
      updatedAt: CREATED,
    })),
  };
}

/** The reference shared-root fixture: report.md of reports/archive, report.html of reports/html. */
function sharedRootState(): SharedRootState {
  const identity = {
    sourceId: SOURCE_MANIFEST.id,
    sourceDigest: SOURCE_MANIFEST.digest,
    sourceCreated: SOURCE_MANIFEST.created,
    createdAt: CREATED,
    updatedAt: CREATED,
  };
  return {
    schemaVersion: 3,
    distributorVersion: "test",
    createdAt: CREATED,
    updatedAt: CREATED,
    state: { mode: "shared_root" },
    owners: [
      {
        scope: ARCHIVE_OWNER,
        reconciliation: { mode: "replace" },
        source: { manifest: SOURCE_MANIFEST },
      },
      {
        scope: HTML_OWNER,
        reconciliation: { mode: "merge" },
        source: { manifest: SOURCE_MANIFEST },
      },
    ],
    outputs: [
      {
        path: "report.md",
        kind: "source",
        sourcePath: "report.md",
        ...fileDigest(REPORT),
        owner: ARCHIVE_OWNER,
        ...identity,
      },
      {
        path: "report.html",
        kind: "generated",
        sourcePath: "report.md",
        transform: "markdown_to_html",
        ...fileDigest(HTML),
        owner: HTML_OWNER,
        ...identity,
      },
    ],
  };
}

const CONTENT: Record<string, string> = {
  "report.md": REPORT,
  "summary.txt": SUMMARY,
  "report.html": HTML,
};

let destination: DestinationFixture;

beforeEach(async () => {
  destination = await DestinationFixture.create("distributor-reconcile-");
});

afterEach(() => destination.remove());

/** Writes the state file and every recorded output with its fixture content. */
const writeDestination = (document: StateDocument): Promise<string> =>
  destination.writeDestination(document, (path) => CONTENT[path] ?? "managed");
const removeOutput = (path: string): Promise<void> => rm(join(destination.root, path));
const config = (stateMode?: string) => destination.config(stateMode);

function options(overrides: Partial<ReconcileStateOptions> = {}): ReconcileStateOptions {
  return {
    config: config(),
    pipelineId: "reports",
    destinationId: "archive",
    now: () => NOW,
    ...overrides,
  };
}

/** Fails `stat` of one path with `permission`, for fault injection only. */
function statFailingRegistry(failPath: string) {
  return faultyLocalRegistry((inner) => ({
    stat: async (path, statOptions) => {
      if (path === failPath) throw injectedFailure("stat", path);
      return inner.stat(path, statOptions);
    },
  }));
}

describe("reconcileState", () => {
  it("TestReconcileStateDryRunReportsMissingManagedOutputsWithoutRewrite", async () => {
    const original = await writeDestination(singleOwnerState());
    await removeOutput("summary.txt");
    await destination.writeFiles({ "extra.txt": "unmanaged" });

    const report = await reconcileState(options({ dryRun: true }));

    expect(report.would_change).toBe(true);
    expect(report.changed).toBe(false);
    expect(paths(report.missing_managed_outputs)).toBe("summary.txt");
    expect(paths(report.unmanaged_entries)).toBe("extra.txt");
    expect(recordedPaths(await destination.readState())).toBe("report.md,summary.txt");
    expect(await destination.stateText()).toBe(original);
  });

  it("TestReconcileStateApplyRemovesMissingRecordsAndPreservesUnmanagedFiles", async () => {
    await writeDestination(singleOwnerState());
    await removeOutput("summary.txt");
    await destination.writeFiles({ "extra.txt": "unmanaged" });

    const report = await reconcileState(options());

    expect(report.changed).toBe(true);
    expect(report.would_change).toBe(false);
    expect(report).toMatchObject({ changed: true });
    const state = await destination.readState();
    expect(recordedPaths(state)).toBe("report.md");
    expect(await readFile(join(destination.root, "extra.txt"), "utf8")).toBe("unmanaged");
    // Only the records and updated_at change; published_at and created_at are kept.
    const expected = singleOwnerState();
    expected.outputs = expected.outputs.slice(0, 1);
    expected.updatedAt = NOW;
    expect(state).toEqual(expected);
  });

  it("TestReconcileStateInvalidStateFailsWithoutRewrite", async () => {
    const invalid = '{"schema_version":2,"pipeline_id":"reports"}';
    await destination.writeFiles({ ".distributor.json": invalid });

    await expect(reconcileState(options())).rejects.toMatchObject({
      name: "StateError",
      code: "state_invalid",
    });
    expect(await destination.stateText()).toBe(invalid);
  });

  it("TestReconcileStateSharedRootOwnerScopeRepairsCurrentOwnerOnly", async () => {
    await writeDestination(sharedRootState());
    await removeOutput("report.md");
    await removeOutput("report.html");

    const report = await reconcileState(options({ config: config("shared_root") }));

    expect(report.changed).toBe(true);
    expect(report.checked_count).toBe(1);
    expect(report.missing_managed_outputs).toEqual([
      {
        path: "report.md",
        owner_scope: { pipeline_id: "reports", destination_id: "archive" },
        storage_status: "missing",
      },
    ]);
    const state = await destination.readState();
    expect(recordedPaths(state)).toBe("report.html");
    if (!isSharedRootState(state)) throw new Error("expected shared-root state");
    expect(state.owners).toEqual(sharedRootState().owners);
    expect(state.updatedAt).toEqual(NOW);
  });

  it("TestReconcileStateSharedRootAllOwnersRepairsEveryOwner", async () => {
    await writeDestination(sharedRootState());
    await removeOutput("report.md");
    await removeOutput("report.html");

    const report = await reconcileState(
      options({ config: config("shared_root"), allOwners: true }),
    );

    expect(report.changed).toBe(true);
    expect(report.checked_count).toBe(2);
    expect(report.owner_scope).toEqual({
      pipeline_id: "reports",
      destination_id: "archive",
      all_owners: true,
    });
    expect(paths(report.missing_managed_outputs)).toBe("report.md,report.html");
    expect(recordedPaths(await destination.readState())).toBe("");
  });

  it("TestExecuteReconcileStateAppliesByDefault: repairs unless dryRun is set", async () => {
    await writeDestination(singleOwnerState());
    await removeOutput("summary.txt");

    const report = await reconcileState(options());

    expect(report.dry_run).toBe(false);
    expect(report.changed).toBe(true);
    expect(recordedPaths(await destination.readState())).toBe("report.md");
  });

  it("reports exactly the reference JSON fields and text line", async () => {
    await writeDestination(singleOwnerState());
    await removeOutput("summary.txt");
    await destination.writeFiles({ "extra.txt": "unmanaged", "empty.txt": "" });

    const report = await reconcileState(options({ dryRun: true }));

    expect(JSON.parse(JSON.stringify(report))).toEqual({
      pipeline_id: "reports",
      destination_id: "archive",
      backend: "local",
      root_path: destination.root,
      state_schema: 2,
      owner_scope: { pipeline_id: "reports", destination_id: "archive" },
      checked_count: 2,
      missing_managed_outputs: [{ path: "summary.txt", storage_status: "missing" }],
      // An empty file has no size field, as the reference omitted zero sizes.
      unmanaged_entries: [
        { path: "empty.txt", type: "file" },
        { path: "extra.txt", type: "file", size: 9 },
      ],
      changed: false,
      would_change: true,
      dry_run: true,
    });
  });

  it("leaves the state byte for byte when nothing is missing", async () => {
    const original = await writeDestination(singleOwnerState());

    const report = await reconcileState(options());

    expect(report).toMatchObject({ changed: false, would_change: false });
    expect(report).toMatchObject({ changed: false, would_change: false, checked_count: 2 });
    expect(await destination.stateText()).toBe(original);
  });

  describe("schema 1 state", () => {
    const v1 = () =>
      `${JSON.stringify(
        {
          schema_version: 1,
          distributor_version: "0.9.0",
          pipeline_id: "reports",
          destination_id: "archive",
          published_at: "2026-05-30T11:12:00Z",
          source: { manifest: JSON.parse(serializeManifest(SOURCE_MANIFEST)) },
          outputs: [
            { path: "report.md", kind: "source", source_path: "report.md", ...fileDigest(REPORT) },
            {
              path: "summary.txt",
              kind: "source",
              source_path: "summary.txt",
              ...fileDigest(SUMMARY),
            },
          ],
        },
        null,
        2,
      )}\n`;

    it("is left byte for byte when nothing is missing", async () => {
      await destination.writeFiles({
        ".distributor.json": v1(),
        "report.md": REPORT,
        "summary.txt": SUMMARY,
      });

      const report = await reconcileState(options());

      expect(report.changed).toBe(false);
      expect(report.state_schema).toBe(2);
      expect(await destination.stateText()).toBe(v1());
    });

    it("is rewritten as schema 2 when a record is removed", async () => {
      await destination.writeFiles({ ".distributor.json": v1(), "report.md": REPORT });

      const report = await reconcileState(options());

      expect(report.changed).toBe(true);
      const written = JSON.parse(await destination.stateText()) as Record<string, unknown>;
      expect(written).toMatchObject({
        schema_version: 2,
        published_at: "2026-05-30T11:12:00Z",
        // Timestamps a schema 1 file lacks are inferred from published_at.
        created_at: "2026-05-30T11:12:00Z",
        updated_at: "2026-06-08T12:00:00Z",
        state: { mode: "single_owner" },
        reconciliation: { mode: "replace" },
        outputs: [
          {
            path: "report.md",
            created_at: "2026-05-30T11:12:00Z",
            updated_at: "2026-05-30T11:12:00Z",
          },
        ],
      });
    });
  });

  it("refuses single-owner state of another owner and leaves it untouched", async () => {
    const original = await writeDestination(
      singleOwnerState({ pipelineId: "reports", destinationId: "other" }),
    );
    await removeOutput("summary.txt");

    await expect(reconcileState(options())).rejects.toThrow(
      "state owner is reports/other, not reports/archive",
    );
    expect(await destination.stateText()).toBe(original);
  });

  it("excludes every owner's managed paths and the state file from unmanaged entries", async () => {
    await writeDestination(sharedRootState());
    await destination.writeFiles({
      "nested/deep/stray.txt": "x",
      "zz.txt": "z",
      "a/.distributor.json": "{}",
    });

    const report = await reconcileState(options({ config: config("shared_root"), dryRun: true }));

    // report.html belongs to reports/html: managed, though not this owner's.
    expect(paths(report.unmanaged_entries)).toBe(
      "a/.distributor.json,nested/deep/stray.txt,zz.txt",
    );
    expect(report.checked_count).toBe(1);
    expect(report).toMatchObject({ changed: false, would_change: false });
  });

  it("reports another owner's missing output only with allOwners", async () => {
    const original = await writeDestination(sharedRootState());
    await removeOutput("report.html");

    const scoped = await reconcileState(options({ config: config("shared_root"), dryRun: true }));
    expect(scoped.missing_managed_outputs).toEqual([]);
    expect(scoped.owner_scope).toEqual({ pipeline_id: "reports", destination_id: "archive" });

    const all = await reconcileState(
      options({ config: config("shared_root"), dryRun: true, allOwners: true }),
    );
    expect(all.missing_managed_outputs).toEqual([
      {
        path: "report.html",
        owner_scope: { pipeline_id: "reports", destination_id: "html" },
        storage_status: "missing",
      },
    ]);
    expect(all).toMatchObject({ changed: false, would_change: true });
    expect(await destination.stateText()).toBe(original);
  });

  it("never deletes files: unmanaged files stay after a repair", async () => {
    await writeDestination(singleOwnerState());
    await removeOutput("report.md");
    await destination.writeFiles({ "extra.txt": "unmanaged", "dir/other.txt": "other" });

    await reconcileState(options());

    expect(await readFile(join(destination.root, "extra.txt"), "utf8")).toBe("unmanaged");
    expect(await readFile(join(destination.root, "dir/other.txt"), "utf8")).toBe("other");
    expect(await readFile(join(destination.root, "summary.txt"), "utf8")).toBe(SUMMARY);
  });

  it("fails without rewriting when a stat fails for a reason other than not found", async () => {
    const original = await writeDestination(singleOwnerState());
    await removeOutput("report.md");

    await expect(
      reconcileState(options({ backends: statFailingRegistry("summary.txt") })),
    ).rejects.toMatchObject({
      name: "StorageError",
      kind: "permission",
    });
    expect(await destination.stateText()).toBe(original);
  });

  it("fails when the destination root has more entries than the walk limit", async () => {
    const original = await writeDestination(singleOwnerState());
    await removeOutput("summary.txt");
    const many = join(destination.root, "many");
    await mkdir(many);
    const limit = 2_000;
    const names = Array.from({ length: limit }, (_, index) => `f${index}`);
    for (let start = 0; start < names.length; start += 500) {
      await Promise.all(
        names.slice(start, start + 500).map((name) => writeFile(join(many, name), "")),
      );
    }

    await expect(reconcileState({ ...options(), listingLimit: limit })).rejects.toMatchObject({
      kind: "limit_exceeded",
    });
    expect(await destination.stateText()).toBe(original);
    // The default bound (`max_entries`) is far above any publication.
    expect(CONFIG_DEFAULTS.maxEntries).toBe(10_000_000);
  });

  it("fails when the destination root has no state file", async () => {
    await destination.writeFiles({ "report.md": REPORT });

    await expect(reconcileState(options())).rejects.toMatchObject({
      code: "state_not_found",
      message: expect.stringContaining(".distributor.json"),
    });
  });

  it("names the bundle paths that keep their own state when the root has none", async () => {
    // A preserve_relative destination: one state per bundle path, none at the root.
    const text = serializeDocument(singleOwnerState());
    await destination.writeFiles({
      "2026/06/01/.distributor.json": text,
      "2026/06/02/.distributor.json": text,
    });

    await expect(reconcileState(options())).rejects.toMatchObject({
      code: "state_not_found",
      message: expect.stringMatching(
        /no \.distributor\.json at the destination root, but 2 bundle path\(s\) below it keep their own \(2026\/06\/01, 2026\/06\/02\).*`audit` checks every bundle path/,
      ),
    });
  });

  it("fails on a state file that is not UTF-8 and leaves it untouched", async () => {
    const bytes = Buffer.from([0x7b, 0xff, 0xfe, 0x7d]);
    await writeFile(join(destination.root, ".distributor.json"), bytes);

    await expect(reconcileState(options())).rejects.toMatchObject({ code: "state_invalid" });
    expect(await readFile(join(destination.root, ".distributor.json"))).toEqual(bytes);
  });

  it("refuses a state file larger than MAX_STATE_BYTES without reading it", async () => {
    const path = join(destination.root, ".distributor.json");
    await writeFile(path, "");
    // Sparse: the size is there without writing the bytes.
    await truncate(path, MAX_STATE_BYTES + 1);

    await expect(reconcileState(options())).rejects.toMatchObject({
      name: "StorageError",
      kind: "limit_exceeded",
    });
    expect((await stat(path)).size).toBe(MAX_STATE_BYTES + 1);
  });
});
