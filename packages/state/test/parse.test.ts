import { buildManifest, parseFrozenManifest, serializeManifest } from "@distributor/bundle";
import {
  parseDocument,
  parseDocumentSteps,
  parseSharedRootState,
  parseSingleOwnerState,
  runSteps,
  type SingleOwnerState,
  StateError,
  serializeDocument,
} from "@distributor/state";
import { describe, expect, it } from "vitest";
import {
  expectedErrors,
  fixture,
  fixtureJson,
  fixtureNames,
  validManifest,
  validSingleOwnerState,
} from "./helpers.js";

function parseJson(value: unknown): SingleOwnerState {
  return parseSingleOwnerState(JSON.stringify(value, null, 2));
}

function expectStateError(run: () => unknown, fragment: string): void {
  let thrown: unknown;
  try {
    run();
  } catch (error) {
    thrown = error;
  }
  expect(thrown).toBeInstanceOf(StateError);
  expect((thrown as Error).message).toContain(fragment);
}

describe("parseSingleOwnerState (schema 2)", () => {
  it("TestParseValidState: reads every field of the schema 2 fixture", () => {
    const state = parseSingleOwnerState(fixture("valid-v2.json"));
    expect(state.schemaVersion).toBe(2);
    expect(state.distributorVersion).toBe("dev");
    expect(state.pipelineId).toBe("reports");
    expect(state.destinationId).toBe("archive");
    expect(state.publishedAt.toISOString()).toBe("2026-05-30T11:12:00.000Z");
    expect(state.createdAt.toISOString()).toBe("2026-05-29T09:30:00.000Z");
    expect(state.updatedAt.toISOString()).toBe("2026-05-30T11:12:05.000Z");
    expect(state.state).toEqual({ mode: "single_owner" });
    expect(state.reconciliation).toEqual({ mode: "replace" });
    expect(state.source.manifest.id).toBe("reports.example.2026-05-30");
    expect(state.source.manifest.files.map((file) => file.path)).toEqual([
      "report.md",
      "summary.txt",
    ]);
    expect(state.outputs).toHaveLength(2);
    expect(state.outputs[0]).toEqual({
      path: "report.md",
      kind: "source",
      sourcePath: "report.md",
      sha256: "sha256:3640fd37140ee4d2e0e93e78834f232ea67a50e7bc6279203690cc7de1975fa6",
      size: 16,
      createdAt: new Date("2026-05-29T09:30:00Z"),
      updatedAt: new Date("2026-05-30T11:12:00Z"),
    });
    expect(state.outputs[1]).toMatchObject({
      kind: "generated",
      transform: "markdown_to_html",
      url: "https://reports.example.com/archive/report.html",
    });
  });

  it("TestParseValidStateWithLinks: reads links.primary_url", () => {
    const state = parseSingleOwnerState(fixture("valid-v2.json"));
    expect(state.links).toEqual({ primaryUrl: "https://reports.example.com/archive/report.html" });
  });

  it("omits links and distributor_version when absent or empty", () => {
    const json = fixtureJson("valid-v2.json");
    delete json.distributor_version;
    json.links = {};
    const state = parseJson(json);
    expect(state).not.toHaveProperty("links");
    expect(state).not.toHaveProperty("distributorVersion");
  });

  it("TestParseNormalizesPublishedAtOffset: offsets become UTC instants", () => {
    const json = fixtureJson("valid-v2.json");
    json.published_at = "2026-05-30T13:12:00+02:00";
    json.created_at = "2026-05-29T04:30:00-05:00";
    const state = parseJson(json);
    expect(state.publishedAt.toISOString()).toBe("2026-05-30T11:12:00.000Z");
    expect(state.createdAt.toISOString()).toBe("2026-05-29T09:30:00.000Z");
  });

  it("truncates fractional seconds so parsed values are what serialising writes", () => {
    const json = fixtureJson("valid-v2.json");
    json.updated_at = "2026-05-30T11:12:05.987654Z";
    expect(parseJson(json).updatedAt.toISOString()).toBe("2026-05-30T11:12:05.000Z");
  });

  it("TestParseRejectsMissingFields: names each missing required field", () => {
    const expected: Record<string, string> = {
      schema_version: "state schema_version is required",
      pipeline_id: "state pipeline_id is required",
      destination_id: "state destination_id is required",
      published_at: "state published_at is required",
      created_at: "state created_at is required",
      updated_at: "state updated_at is required",
      state: "state state.mode is required",
      reconciliation: "state reconciliation.mode is required",
      source: "state source.manifest is required",
      outputs: "state outputs is required",
    };
    for (const [key, fragment] of Object.entries(expected)) {
      const json = fixtureJson("valid-v2.json");
      delete json[key];
      expectStateError(() => parseJson(json), fragment);
      json[key] = null;
      expectStateError(() => parseJson(json), fragment);
    }
  });

  it("rejects empty required strings and modes as missing", () => {
    const json = fixtureJson("valid-v2.json");
    json.pipeline_id = "";
    expectStateError(() => parseJson(json), "state pipeline_id is required");
    const modes = fixtureJson("valid-v2.json");
    modes.reconciliation = { mode: "" };
    expectStateError(() => parseJson(modes), "state reconciliation.mode is required");
  });

  it("rejects values of the wrong JSON type", () => {
    const cases: [string, unknown, string][] = [
      ["schema_version", "2", "state schema_version must be an integer"],
      ["schema_version", 2.5, "state schema_version must be an integer"],
      ["pipeline_id", 7, "state pipeline_id must be a string"],
      ["distributor_version", true, "state distributor_version must be a string"],
      ["state", "single_owner", "state state must be an object"],
      ["outputs", {}, "state outputs must be an array"],
      ["links", "https://x.example", "state links must be an object"],
    ];
    for (const [key, value, fragment] of cases) {
      const json = fixtureJson("valid-v2.json");
      json[key] = value;
      expectStateError(() => parseJson(json), fragment);
    }
  });

  it("TestParseRejectsInvalidSchemaVersion: schema_version must be 1 or 2", () => {
    for (const version of [0, 3, 4]) {
      const json = fixtureJson("valid-v2.json");
      json.schema_version = version;
      expectStateError(() => parseJson(json), "state schema_version must be 1 or 2");
    }
  });

  it("TestParseRejectsInvalidEmbeddedManifest: reports the manifest problem under source.manifest", () => {
    const json = fixtureJson("valid-v2.json");
    const manifest = (json.source as { manifest: Record<string, unknown> }).manifest;
    manifest.schema_version = 2;
    expectStateError(() => parseJson(json), "state source.manifest: schema_version must be 1");
    manifest.schema_version = 1;
    manifest.extra = true;
    expectStateError(() => parseJson(json), "state source.manifest: unknown field extra");
  });

  it("TestParseRejectsInvalidOutputMetadata: every output rule", () => {
    const cases: [string, (output: Record<string, unknown>) => void, string][] = [
      ["missing path", (o) => delete o.path, "state outputs[0].path is required"],
      ["invalid path", (o) => (o.path = "/report.md"), "state outputs[0].path: path is absolute"],
      ["unclean path", (o) => (o.path = "a/./b.md"), "state outputs[0].path:"],
      ["missing kind", (o) => delete o.kind, "state outputs[0].kind is required"],
      [
        "invalid kind",
        (o) => (o.kind = "copy"),
        "state outputs[0].kind must be source or generated",
      ],
      [
        "missing source path",
        (o) => delete o.source_path,
        "state outputs[0].source_path is required",
      ],
      ["invalid source path", (o) => (o.source_path = "../x"), "state outputs[0].source_path:"],
      ["missing sha256", (o) => delete o.sha256, "state outputs[0].sha256 is required"],
      ["uppercase sha256", (o) => (o.sha256 = "sha256:ABC"), "state outputs[0].sha256:"],
      ["missing size", (o) => delete o.size, "state outputs[0].size is required"],
      ["negative size", (o) => (o.size = -1), "state outputs[0].size must be non-negative"],
      ["fractional size", (o) => (o.size = 1.5), "state outputs[0].size must be an integer"],
      [
        "missing output created_at",
        (o) => delete o.created_at,
        "state outputs[0].created_at is required",
      ],
      [
        "missing output updated_at",
        (o) => delete o.updated_at,
        "state outputs[0].updated_at is required",
      ],
      [
        "bad output updated_at",
        (o) => (o.updated_at = "yesterday"),
        "state outputs[0].updated_at must be RFC3339",
      ],
      ["invalid output url", (o) => (o.url = "file:///tmp/report.md"), "state outputs[0].url:"],
      ["relative output url", (o) => (o.url = "/archive/report.md"), "state outputs[0].url:"],
      [
        "generated without transform",
        (o) => {
          o.kind = "generated";
          delete o.transform;
        },
        "state outputs[0].transform is required for generated output",
      ],
    ];
    for (const [name, mutate, fragment] of cases) {
      const json = fixtureJson("valid-v2.json");
      mutate((json.outputs as Record<string, unknown>[])[0] as Record<string, unknown>);
      expect(() => parseJson(json), name).toThrow(fragment);
    }
  });

  it("rejects duplicate output paths", () => {
    const json = fixtureJson("valid-v2.json");
    (json.outputs as Record<string, unknown>[])[1]!.path = "report.md";
    expectStateError(() => parseJson(json), 'state outputs[1].path duplicates "report.md"');
  });

  it("rejects a duplicate output path that records out of order hide", () => {
    const json = fixtureJson("valid-v2.json");
    const outputs = json.outputs as Record<string, unknown>[];
    // report.md, report.html, report.md: the second path is before the first in order.
    outputs.push({ ...outputs[0] });
    expectStateError(() => parseJson(json), 'state outputs[2].path duplicates "report.md"');
  });

  it("accepts an empty outputs array", () => {
    const json = fixtureJson("valid-v2.json");
    json.outputs = [];
    expect(parseJson(json).outputs).toEqual([]);
  });

  it("TestParseRejectsMalformedPublishedTimestamp: published_at must be RFC3339", () => {
    const json = fixtureJson("valid-v2.json");
    json.published_at = "May 30";
    expectStateError(() => parseJson(json), "published_at must be RFC3339");
  });

  it("TestParseRejectsMalformedCreatedTimestamp: created_at must be RFC3339", () => {
    for (const bad of ["May 30", "2026-05-30", "2026-05-30T11:12:00", "2026-02-30T00:00:00Z"]) {
      const json = fixtureJson("valid-v2.json");
      json.created_at = bad;
      expectStateError(() => parseJson(json), "created_at must be RFC3339");
    }
  });

  it("rejects invalid JSON and trailing data", () => {
    expectStateError(() => parseSingleOwnerState("{"), "parse distributor state:");
    const text = fixture("valid-v2.json");
    expectStateError(
      () => parseSingleOwnerState(`${text}{}`),
      "parse distributor state: trailing data",
    );
    expectStateError(
      () => parseSingleOwnerState(`${text} x`),
      "parse distributor state: trailing data",
    );
    expectStateError(() => parseSingleOwnerState("2 3"), "parse distributor state: trailing data");
    expectStateError(() => parseSingleOwnerState('"x"'), "must be a JSON object");
    // Trailing whitespace is not data.
    expect(parseSingleOwnerState(`${text}\n\n  `).pipelineId).toBe("reports");
  });

  it("ignores unknown fields, as the reference decoder did", () => {
    const json = fixtureJson("valid-v2.json");
    json.future_field = { anything: true };
    (json.outputs as Record<string, unknown>[])[0]!.etag = "abc";
    expect(parseJson(json)).toEqual(parseSingleOwnerState(fixture("valid-v2.json")));
  });
});

describe("legacy schema 1", () => {
  it("TestParseLegacyStateInfersSingleOwnerDefaults: normalises to schema 2 replace state", () => {
    const state = parseSingleOwnerState(fixture("valid-v1.json"));
    const published = new Date("2026-05-30T11:12:00Z");
    expect(state.schemaVersion).toBe(2);
    expect(state.distributorVersion).toBe("0.9.0");
    expect(state.state).toEqual({ mode: "single_owner" });
    expect(state.reconciliation).toEqual({ mode: "replace" });
    expect(state.publishedAt).toEqual(published);
    expect(state.createdAt).toEqual(published);
    expect(state.updatedAt).toEqual(published);
    expect(state.outputs).toHaveLength(2);
    for (const output of state.outputs) {
      expect(output.createdAt).toEqual(published);
      expect(output.updatedAt).toEqual(published);
    }
    // Each record owns its Date: changing one must not move another.
    state.outputs[0]!.updatedAt.setTime(0);
    expect(state.outputs[1]!.updatedAt).toEqual(published);
    expect(state.createdAt).toEqual(published);
  });

  it("parseDocument gives the same single-owner state", () => {
    expect(parseDocument(fixture("valid-v1.json"))).toEqual(
      parseSingleOwnerState(fixture("valid-v1.json")),
    );
  });

  it("ignores schema 2 fields a schema 1 document happens to carry", () => {
    const json = fixtureJson("valid-v1.json");
    json.created_at = "not a time";
    json.state = { mode: "shared_root" };
    const state = parseJson(json);
    expect(state.createdAt).toEqual(state.publishedAt);
    expect(state.state.mode).toBe("single_owner");
  });

  it("still requires the schema 1 fields", () => {
    const json = fixtureJson("valid-v1.json");
    delete json.published_at;
    expectStateError(() => parseJson(json), "state published_at is required");
  });
});

describe("parseSharedRootState", () => {
  it("refuses other schema versions with the accepted one", () => {
    expectStateError(
      () => parseSharedRootState(fixture("valid-v2.json")),
      "state schema_version must be 3",
    );
  });
});

describe("parseDocument", () => {
  it("refuses unknown schema versions with the accepted list", () => {
    const json = fixtureJson("valid-v2.json");
    json.schema_version = 9;
    expectStateError(
      () => parseDocument(JSON.stringify(json)),
      "state schema_version must be 1, 2 or 3",
    );
  });

  it("every invalid fixture fails with its documented fragment", () => {
    const expected = expectedErrors();
    const invalid = fixtureNames().filter((name) => name.startsWith("invalid-"));
    expect(Object.keys(expected).sort()).toEqual(invalid);
    for (const [name, fragment] of Object.entries(expected)) {
      expect(() => parseDocument(fixture(name)), name).toThrow(fragment);
      expect(() => parseDocument(fixture(name)), name).toThrow(StateError);
    }
  });

  it("every valid fixture parses", () => {
    expect(parseDocument(fixture("valid-v1.json")).schemaVersion).toBe(2);
    expect(parseDocument(fixture("valid-v2.json")).schemaVersion).toBe(2);
    expect(parseDocument(fixture("valid-v3.json")).schemaVersion).toBe(3);
  });
});

describe("parseDocumentSteps with a shared manifest", () => {
  it("reads the same document whether or not the manifest lends its strings", () => {
    const text = serializeDocument(validSingleOwnerState());
    const plain = parseDocument(text);
    const shared = runSteps(
      parseDocumentSteps(text, { sharedManifest: validSingleOwnerState().source.manifest }),
    );
    expect(shared).toEqual(plain);
    // A manifest that differs lends nothing, and changes nothing either.
    const other = buildManifest({
      ...validManifest(),
      files: [{ path: "other.txt", sha256: `sha256:${"0".repeat(64)}`, size: 1 }],
    });
    expect(runSteps(parseDocumentSteps(text, { sharedManifest: other }))).toEqual(plain);
  });

  it("shares the held manifest's entries with a big state's embedded manifest, read in pieces", () => {
    const count = 3000;
    const digest = (index: number) => `sha256:${String(index).padStart(64, "0")}`;
    const files = Array.from({ length: count }, (_, index) => ({
      path: `d/f${String(index).padStart(5, "0")}.txt`,
      sha256: digest(index),
      size: index,
    }));
    const manifest = buildManifest({ ...validManifest(), files });
    const base = validSingleOwnerState();
    const when = new Date("2026-06-01T00:00:00Z");
    const state = {
      ...base,
      source: { manifest },
      outputs: files.map((file) => ({
        path: file.path,
        kind: "source" as const,
        sourcePath: file.path,
        sha256: file.sha256,
        size: file.size,
        createdAt: when,
        updatedAt: when,
      })),
    };
    const text = serializeDocument(state);
    expect(text.length).toBeGreaterThan(4 * 64 * 1024);
    const plain = parseDocument(text);
    // The held manifest differs at one entry: that entry is the state's own, the others shared.
    // Frozen, as a run's source manifest is: only such a manifest lends its entries.
    const held = parseFrozenManifest(
      serializeManifest(
        buildManifest({
          ...validManifest(),
          files: files.map((file, index) => (index === 7 ? { ...file, size: 1_000_000 } : file)),
        }),
      ),
    );
    const pieces = piecesOf(text, 5000);
    const whole = () => {
      throw new Error("a valid state is never read whole");
    };
    const read = runSteps(parseDocumentSteps({ pieces, whole }, { sharedManifest: held }));
    expect(read).toEqual(plain);
    if (read.schemaVersion !== 2) throw new Error("single-owner state expected");
    const embedded = read.source.manifest.files;
    expect(embedded[0]).toBe(held.files[0]);
    expect(embedded[count - 1]).toBe(held.files[count - 1]);
    expect(embedded[7]).not.toBe(held.files[7]);
    expect(embedded[7]).toEqual(files[7]);
    // A caller's own manifest, not frozen, lends strings only: its entries stay its own.
    const own = buildManifest({ ...validManifest(), files });
    const ownPieces = piecesOf(text, 5000);
    const lent = runSteps(
      parseDocumentSteps({ pieces: ownPieces, whole }, { sharedManifest: own }),
    );
    expect(lent).toEqual(plain);
    if (lent.schemaVersion !== 2) throw new Error("single-owner state expected");
    expect(lent.source.manifest.files[0]).not.toBe(own.files[0]);
    expect(Object.isFrozen(own.files[0])).toBe(false);
  });
});

/** `text` handed out `length` characters at a time. */
function piecesOf(text: string, length: number) {
  let at = 0;
  return {
    next(): string | undefined {
      if (at >= text.length) return undefined;
      const piece = text.slice(at, at + length);
      at += piece.length;
      return piece;
    },
  };
}
