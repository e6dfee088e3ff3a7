import {
  allManagedOutputPaths,
  findOwner,
  isSharedRootState,
  isSingleOwnerState,
  mergeOwnerOutputs,
  newSharedRootState,
  otherOwnerOutputs,
  outputOwner,
  ownerManagedOutputPaths,
  ownerOutputs,
  ownerScope,
  ownerSourceManifest,
  parseDocument,
  parseSharedRootState,
  pathOwnershipConflict,
  projectOwnerOutputs,
  removeMissingOwnerOutputs,
  removeMissingSharedRootOutputs,
  replaceOwnerOutputs,
  type SharedRootOutputRecord,
  StateError,
  serializeSharedRootState,
  singleOwnerAsOwnerOutputs,
  singleOwnerAsOwnerRecord,
  validateSharedRootState,
} from "@distributor/state";
import { describe, expect, it } from "vitest";
import {
  fixture,
  fixtureJson,
  validManifest,
  validSharedRootState,
  validSingleOwnerState,
} from "./helpers.js";

const archive = ownerScope("reports", "archive");
const html = ownerScope("reports", "html");

describe("shared-root parsing", () => {
  it("TestParseDocumentHandlesSingleOwnerAndSharedRoot: dispatches on schema_version", () => {
    const single = parseDocument(fixture("valid-v2.json"));
    expect(isSingleOwnerState(single)).toBe(true);
    expect(isSharedRootState(single)).toBe(false);
    const shared = parseDocument(fixture("valid-v3.json"));
    expect(isSharedRootState(shared)).toBe(true);
    expect(isSingleOwnerState(shared)).toBe(false);
    expect(shared.state.mode).toBe("shared_root");
  });

  it("TestParseSharedRootState: reads owners, outputs and the owner's manifest", () => {
    const state = parseSharedRootState(fixture("valid-v3.json"));
    expect(state.schemaVersion).toBe(3);
    expect(state.distributorVersion).toBe("dev");
    expect(state.createdAt).toEqual(new Date("2026-05-30T11:12:00Z"));
    expect(state.updatedAt).toEqual(new Date("2026-05-30T12:10:00Z"));
    expect(state.state).toEqual({ mode: "shared_root" });
    expect(state.owners).toHaveLength(2);
    expect(state.outputs).toHaveLength(2);
    expect(state.owners[0]).toMatchObject({
      scope: archive,
      reconciliation: { mode: "replace" },
      links: { primaryUrl: "https://reports.example.com/archive/report.md" },
    });
    expect(state.owners[1]).toMatchObject({ scope: html, reconciliation: { mode: "merge" } });
    expect(state.owners[1]).not.toHaveProperty("links");
    expect(state.outputs[1]).toEqual({
      path: "report.html",
      kind: "generated",
      sourcePath: "report.md",
      transform: "markdown_to_html",
      url: "https://reports.example.com/html/report.html",
      sha256: `sha256:${"a".repeat(64)}`,
      size: 128,
      owner: html,
      sourceId: "reports.example.2026-05-30",
      sourceDigest: "sha256:b84640b7c8a98f1d0cea9f07736e151daf6833cc229b46c0bf3610d16d041bb7",
      sourceCreated: new Date("2026-05-30T11:00:00Z"),
      createdAt: new Date("2026-05-30T11:12:00Z"),
      updatedAt: new Date("2026-05-30T12:10:00Z"),
    });
    expect(ownerSourceManifest(state, archive)?.id).toBe(validManifest().id);
    expect(ownerSourceManifest(state, ownerScope("reports", "missing"))).toBeUndefined();
  });

  it("TestParseSharedRootRejectsInvalidMetadata: each mutation is refused", () => {
    // biome-ignore lint/suspicious/noExplicitAny: the fixture is mutated as free-form JSON
    type Json = Record<string, any>;
    const cases: [string, (json: Json) => void, string][] = [
      ["schema", (j) => (j.schema_version = 2), "state schema_version must be 3"],
      [
        "state mode",
        (j) => (j.state.mode = "single_owner"),
        "state state.mode must be shared_root",
      ],
      ["missing state", (j) => delete j.state, "state state.mode is required"],
      ["created_at", (j) => delete j.created_at, "state created_at is required"],
      ["updated_at", (j) => (j.updated_at = "noon"), "state updated_at must be RFC3339"],
      ["missing owners", (j) => delete j.owners, "state owners is required"],
      ["missing outputs", (j) => delete j.outputs, "state outputs is required"],
      [
        "owner pipeline",
        (j) => delete j.owners[0].pipeline_id,
        "state owners[0].pipeline_id is required",
      ],
      [
        "owner destination",
        (j) => delete j.owners[0].destination_id,
        "state owners[0].destination_id is required",
      ],
      [
        "owner reconciliation",
        (j) => delete j.owners[0].reconciliation,
        "state owners[0].reconciliation.mode is required",
      ],
      [
        "owner reconciliation value",
        (j) => (j.owners[0].reconciliation.mode = "sync"),
        "state owners[0].reconciliation.mode must be replace or merge",
      ],
      [
        "owner manifest",
        (j) => delete j.owners[0].source,
        "state owners[0].source.manifest is required",
      ],
      [
        "owner manifest invalid",
        (j) => (j.owners[0].source.manifest.id = "-bad"),
        "state owners[0].source.manifest: id must match",
      ],
      [
        "duplicate owner",
        (j) => (j.owners[1].destination_id = "archive"),
        "state owners[1] duplicates owner reports/archive",
      ],
      [
        "unknown output owner",
        (j) => (j.outputs[1].destination_id = "missing"),
        "state outputs[1] references unknown owner reports/missing",
      ],
      [
        "duplicate output",
        (j) => (j.outputs[1].path = "report.md"),
        'state outputs[1].path duplicates "report.md"',
      ],
      [
        "invalid source digest",
        (j) => (j.outputs[0].source_digest = `SHA256:${"a".repeat(64)}`),
        "state outputs[0].source_digest:",
      ],
      [
        "invalid owner link",
        (j) => (j.owners[0].links.primary_url = "file:///tmp/report.md"),
        "state owners[0].links.primary_url:",
      ],
      [
        "output pipeline",
        (j) => delete j.outputs[0].pipeline_id,
        "state outputs[0].pipeline_id is required",
      ],
      [
        "output destination",
        (j) => delete j.outputs[0].destination_id,
        "state outputs[0].destination_id is required",
      ],
      [
        "output source id",
        (j) => delete j.outputs[0].source_id,
        "state outputs[0].source_id is required",
      ],
      [
        "output source digest",
        (j) => delete j.outputs[0].source_digest,
        "state outputs[0].source_digest is required",
      ],
      [
        "output source created",
        (j) => (j.outputs[0].source_created = "x"),
        "state outputs[0].source_created must be RFC3339",
      ],
      [
        "output created_at",
        (j) => delete j.outputs[0].created_at,
        "state outputs[0].created_at is required",
      ],
      [
        "output updated_at",
        (j) => delete j.outputs[0].updated_at,
        "state outputs[0].updated_at is required",
      ],
      [
        "generated transform",
        (j) => delete j.outputs[1].transform,
        "state outputs[1].transform is required for generated output",
      ],
      [
        "output kind",
        (j) => (j.outputs[0].kind = "link"),
        "state outputs[0].kind must be source or generated",
      ],
      [
        "output size",
        (j) => (j.outputs[0].size = -5),
        "state outputs[0].size must be non-negative",
      ],
      ["output url", (j) => (j.outputs[1].url = "mailto:x@example.com"), "state outputs[1].url:"],
    ];
    for (const [name, mutate, fragment] of cases) {
      const json = fixtureJson("valid-v3.json");
      mutate(json);
      expect(() => parseSharedRootState(JSON.stringify(json)), name).toThrow(fragment);
    }
  });

  it("rejects trailing data", () => {
    expect(() => parseSharedRootState(`${fixture("valid-v3.json")}[]`)).toThrow(
      "parse distributor state: trailing data",
    );
  });

  it("accepts a shared root whose owners have no outputs", () => {
    const json = fixtureJson("valid-v3.json");
    json.outputs = [];
    expect(parseSharedRootState(JSON.stringify(json)).outputs).toEqual([]);
  });
});

describe("shared-root helpers", () => {
  it("TestSharedRootOutputHelpers: managed paths per owner, for all, and ownership conflicts", () => {
    const state = validSharedRootState();
    expect(ownerManagedOutputPaths(state, archive)).toEqual(["report.md"]);
    expect(ownerManagedOutputPaths(state, html)).toEqual(["report.html"]);
    expect(allManagedOutputPaths(state)).toEqual(["report.md", "report.html"]);
    expect(pathOwnershipConflict(state, archive, ["report.md", "report.html"])).toEqual({
      path: "report.html",
      owner: html,
    });
    expect(pathOwnershipConflict(state, archive, ["report.md", "new.md"])).toBeUndefined();
    expect(outputOwner(state, "report.html")).toEqual(html);
    expect(outputOwner(state, "nothing.md")).toBeUndefined();
    expect(findOwner(state, html)?.reconciliation.mode).toBe("merge");
    expect(ownerOutputs(state, archive).map((o) => o.path)).toEqual(["report.md"]);
    expect(otherOwnerOutputs(state, archive).map((o) => o.path)).toEqual(["report.html"]);
  });

  it("TestRemoveMissingSharedRootOwnerOutputs: removes only the owner's missing records", () => {
    const state = validSharedRootState();
    const before = structuredClone(state);
    const { state: next, changed } = removeMissingOwnerOutputs(state, archive, [
      "report.md",
      "report.html",
    ]);
    expect(changed).toBe(true);
    expect(allManagedOutputPaths(next)).toEqual(["report.html"]);
    expect(outputOwner(next, "report.html")).toEqual(html);
    expect(next.owners).toEqual(state.owners);
    expect(state).toEqual(before);

    const unchanged = removeMissingOwnerOutputs(next, archive, ["report.html"]);
    expect(unchanged.changed).toBe(false);
    expect(unchanged.state).toEqual(next);
    expect(removeMissingOwnerOutputs(next, archive, []).changed).toBe(false);
  });

  it("TestRemoveMissingSharedRootOutputs: removes missing records of every owner", () => {
    const state = validSharedRootState();
    const { state: next, changed } = removeMissingSharedRootOutputs(state, [
      "report.md",
      "report.html",
    ]);
    expect(changed).toBe(true);
    expect(allManagedOutputPaths(next)).toEqual([]);
    expect(next.owners).toHaveLength(2);
    expect(removeMissingSharedRootOutputs(state, ["other.md"]).changed).toBe(false);
    // The repaired state is still valid (owners without outputs are allowed).
    expect(() => validateSharedRootState(next)).not.toThrow();
  });

  it("TestSharedRootProjectAndMergeOwnerOutputs: merge keeps created_at, replace drops omitted outputs", () => {
    const state = validSharedRootState();
    const owner = findOwner(state, archive)!;
    const manifest = validManifest();
    const now = new Date("2026-05-30T12:30:00.400Z");
    const planned = projectOwnerOutputs(
      [
        {
          path: "report.md",
          kind: "source",
          sourcePath: "report.md",
          sha256: manifest.files[0]!.sha256,
          size: manifest.files[0]!.size,
        },
        {
          path: "summary.txt",
          kind: "source",
          sourcePath: "summary.txt",
          sha256: manifest.files[1]!.sha256,
          size: manifest.files[1]!.size,
        },
      ],
      state.outputs,
      archive,
      manifest,
      now,
    );
    const second = new Date("2026-05-30T12:30:00Z");
    expect(planned[0]).toMatchObject({
      owner: archive,
      sourceId: manifest.id,
      sourceDigest: manifest.digest,
      sourceCreated: manifest.created,
      createdAt: new Date("2026-05-30T11:12:00Z"),
      updatedAt: second,
    });
    expect(planned[1]).toMatchObject({ createdAt: second, updatedAt: second });

    const merged = mergeOwnerOutputs(state, owner, planned);
    expect(allManagedOutputPaths(merged)).toEqual(["report.md", "report.html", "summary.txt"]);
    expect(merged.outputs[0]!.createdAt).toEqual(new Date("2026-05-30T11:12:00Z"));
    expect(merged.outputs[0]!.updatedAt).toEqual(second);
    expect(merged.outputs[1]).toEqual(state.outputs[1]);

    const replaced = replaceOwnerOutputs(state, owner, planned.slice(1));
    expect(allManagedOutputPaths(replaced)).toEqual(["report.html", "summary.txt"]);
    const replacedAll = replaceOwnerOutputs(state, owner, planned);
    expect(allManagedOutputPaths(replacedAll)).toEqual(["report.html", "report.md", "summary.txt"]);
    expect(() => serializeSharedRootState(replacedAll)).not.toThrow();
  });

  it("projection does not keep created_at of a path another owner holds", () => {
    const state = validSharedRootState();
    const [output] = projectOwnerOutputs(
      [
        {
          path: "report.html",
          kind: "source",
          sourcePath: "report.md",
          sha256: state.outputs[1]!.sha256,
          size: 1,
        },
      ],
      state.outputs,
      archive,
      validManifest(),
      new Date("2026-06-01T00:00:00Z"),
    );
    expect(output!.createdAt).toEqual(new Date("2026-06-01T00:00:00Z"));
  });

  it("TestSharedRootOwnerOutputHelpersRejectConflicts: another owner's path is refused", () => {
    const state = validSharedRootState();
    const before = structuredClone(state);
    const owner = findOwner(state, archive)!;
    const planned: SharedRootOutputRecord[] = [
      { ...state.outputs[0]!, path: "report.html", owner: archive },
    ];
    for (const apply of [mergeOwnerOutputs, replaceOwnerOutputs]) {
      expect(() => apply(state, owner, planned)).toThrow(
        'state output path "report.html" is owned by reports/html',
      );
      expect(() => apply(state, owner, planned)).toThrow(StateError);
    }
    expect(state).toEqual(before);
  });

  it("refuses planned records of another owner and duplicated planned paths", () => {
    const state = validSharedRootState();
    const owner = findOwner(state, archive)!;
    const foreign: SharedRootOutputRecord[] = [
      { ...state.outputs[0]!, path: "new.md", owner: html },
    ];
    expect(() => mergeOwnerOutputs(state, owner, foreign)).toThrow(
      'state output path "new.md" is owned by reports/html, not reports/archive',
    );
    const twice: SharedRootOutputRecord[] = [state.outputs[0]!, state.outputs[0]!];
    expect(() => replaceOwnerOutputs(state, owner, twice)).toThrow(
      'state output path "report.md" is duplicated',
    );
  });

  it("a new owner is appended; an existing owner record is replaced in place", () => {
    const state = validSharedRootState();
    const newcomer = { ...findOwner(state, archive)!, scope: ownerScope("news", "archive") };
    const added = mergeOwnerOutputs(state, newcomer, []);
    expect(added.owners.map((o) => o.scope)).toEqual([archive, html, newcomer.scope]);
    const updated = { ...findOwner(state, archive)!, reconciliation: { mode: "merge" as const } };
    const next = replaceOwnerOutputs(state, updated, []);
    expect(next.owners.map((o) => o.scope)).toEqual([archive, html]);
    expect(next.owners[0]!.reconciliation.mode).toBe("merge");
    expect(allManagedOutputPaths(next)).toEqual(["report.html"]);
  });

  it("migrates compatible single-owner state into an owner scope", () => {
    const single = validSingleOwnerState();
    const owner = singleOwnerAsOwnerRecord(single);
    expect(owner).toEqual({
      scope: archive,
      reconciliation: { mode: "replace" },
      source: { manifest: single.source.manifest },
      links: { primaryUrl: "https://reports.example.com/archive/report.html" },
    });
    const outputs = singleOwnerAsOwnerOutputs(single);
    expect(outputs.map((o) => o.path)).toEqual(["report.md", "report.html"]);
    expect(outputs[0]).toMatchObject({
      owner: archive,
      sourceId: single.source.manifest.id,
      sourceDigest: single.source.manifest.digest,
      sourceCreated: single.source.manifest.created,
      createdAt: single.outputs[0]!.createdAt,
      updatedAt: single.outputs[0]!.updatedAt,
    });
    const migrated = replaceOwnerOutputs(
      newSharedRootState(single.createdAt, "dev"),
      owner,
      outputs,
    );
    expect(() => validateSharedRootState(migrated)).not.toThrow();
    expect(parseSharedRootState(serializeSharedRootState(migrated))).toEqual(migrated);
  });

  it("newSharedRootState starts empty at a second-precision time", () => {
    const state = newSharedRootState(new Date("2026-06-04T12:00:00.900Z"));
    expect(state).toEqual({
      schemaVersion: 3,
      createdAt: new Date("2026-06-04T12:00:00Z"),
      updatedAt: new Date("2026-06-04T12:00:00Z"),
      state: { mode: "shared_root" },
      owners: [],
      outputs: [],
    });
    expect(serializeSharedRootState(state)).toContain('"owners":[]');
  });
});
