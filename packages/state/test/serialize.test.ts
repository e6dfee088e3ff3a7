import {
  buildManifest,
  fileDigest,
  parseFrozenManifest,
  serializeManifest,
} from "@distributor/bundle";
import {
  encodeDocument,
  encodeDocumentSteps,
  parseDocument,
  parseSharedRootState,
  parseSingleOwnerState,
  StateError,
  serializeDocument,
  serializeSharedRootState,
  serializeSingleOwnerState,
} from "@distributor/state";
import { describe, expect, it } from "vitest";
import { compactFixture, fixture, validSharedRootState, validSingleOwnerState } from "./helpers.js";

describe("serializeSingleOwnerState", () => {
  it("writes the schema 2 fixture byte for byte, compact", () => {
    const text = fixture("valid-v2.json");
    expect(serializeSingleOwnerState(parseSingleOwnerState(text))).toBe(
      compactFixture("valid-v2.json"),
    );
  });

  it("uses the documented key order, one line and a trailing newline", () => {
    const text = serializeSingleOwnerState(validSingleOwnerState());
    expect(Object.keys(JSON.parse(text))).toEqual([
      "schema_version",
      "distributor_version",
      "pipeline_id",
      "destination_id",
      "published_at",
      "created_at",
      "updated_at",
      "state",
      "reconciliation",
      "source",
      "links",
      "outputs",
    ]);
    expect(Object.keys(JSON.parse(text).outputs[1])).toEqual([
      "path",
      "kind",
      "source_path",
      "transform",
      "url",
      "sha256",
      "size",
      "created_at",
      "updated_at",
    ]);
    expect(text.startsWith('{"schema_version":2,')).toBe(true);
    expect(text.endsWith("}\n")).toBe(true);
    expect(text.indexOf("\n")).toBe(text.length - 1);
  });

  it("TestMarshalNormalizesPublishedAtUTC: writes UTC with second precision", () => {
    const state = validSingleOwnerState();
    // 13:12:00.750 at +02:00 is 11:12:00 UTC once the milliseconds are dropped.
    state.publishedAt = new Date(Date.parse("2026-05-30T13:12:00.750+02:00"));
    state.createdAt = state.publishedAt;
    state.outputs[0]!.updatedAt = state.publishedAt;
    const json = JSON.parse(serializeSingleOwnerState(state));
    expect(json.published_at).toBe("2026-05-30T11:12:00Z");
    expect(json.created_at).toBe("2026-05-30T11:12:00Z");
    expect(json.outputs[0].updated_at).toBe("2026-05-30T11:12:00Z");
  });

  it("TestMarshalIncludesLinksWhenPresent: links only when there is a primary URL", () => {
    const state = validSingleOwnerState();
    expect(serializeSingleOwnerState(state)).toContain(
      '"links":{"primary_url":"https://reports.example.com/archive/report.html"}',
    );
    delete state.links;
    delete state.distributorVersion;
    delete state.outputs[1]!.url;
    const text = serializeSingleOwnerState(state);
    expect(text).not.toContain('"links"');
    expect(text).not.toContain('"distributor_version"');
    expect(Object.keys(JSON.parse(text).outputs[1])).not.toContain("url");
    state.links = { primaryUrl: "" };
    expect(serializeSingleOwnerState(state)).not.toContain('"links"');
  });

  it("refuses to write invalid state", () => {
    const state = validSingleOwnerState();
    state.outputs[0]!.size = -1;
    expect(() => serializeSingleOwnerState(state)).toThrow(StateError);
    expect(() => serializeSingleOwnerState(state)).toThrow(
      "state outputs[0].size must be non-negative",
    );
  });

  it("writes a schema 1 document as valid schema 2 state, without touching the input text", () => {
    const legacy = fixture("valid-v1.json");
    const copy = `${legacy}`;
    const state = parseSingleOwnerState(legacy);
    const text = serializeSingleOwnerState(state);
    expect(legacy).toBe(copy);
    const json = JSON.parse(text);
    expect(json.schema_version).toBe(2);
    expect(json.created_at).toBe("2026-05-30T11:12:00Z");
    expect(json.updated_at).toBe("2026-05-30T11:12:00Z");
    expect(json.state).toEqual({ mode: "single_owner" });
    expect(json.reconciliation).toEqual({ mode: "replace" });
    expect(json.outputs[1].created_at).toBe("2026-05-30T11:12:00Z");
    expect(parseSingleOwnerState(text)).toEqual(state);
  });
});

describe("serializeSharedRootState", () => {
  it("writes the schema 3 fixture byte for byte, compact", () => {
    const text = fixture("valid-v3.json");
    expect(serializeSharedRootState(parseSharedRootState(text))).toBe(
      compactFixture("valid-v3.json"),
    );
  });

  it("uses the documented key order for owners and outputs", () => {
    const json = JSON.parse(serializeSharedRootState(validSharedRootState()));
    expect(Object.keys(json)).toEqual([
      "schema_version",
      "distributor_version",
      "created_at",
      "updated_at",
      "state",
      "owners",
      "outputs",
    ]);
    expect(Object.keys(json.owners[0])).toEqual([
      "pipeline_id",
      "destination_id",
      "reconciliation",
      "source",
      "links",
    ]);
    expect(Object.keys(json.owners[1])).not.toContain("links");
    expect(Object.keys(json.outputs[1])).toEqual([
      "path",
      "kind",
      "source_path",
      "transform",
      "url",
      "sha256",
      "size",
      "pipeline_id",
      "destination_id",
      "source_id",
      "source_digest",
      "source_created",
      "created_at",
      "updated_at",
    ]);
  });

  it("TestSharedRootMarshalNormalizesTimestamps: created_at, updated_at and source_created in UTC", () => {
    const state = validSharedRootState();
    const offset = new Date(Date.parse("2026-05-30T13:12:00+02:00"));
    state.createdAt = offset;
    state.updatedAt = offset;
    state.outputs[0]!.sourceCreated = offset;
    state.outputs[0]!.createdAt = offset;
    state.outputs[0]!.updatedAt = offset;
    const text = serializeSharedRootState(state);
    for (const want of [
      '"created_at":"2026-05-30T11:12:00Z"',
      '"updated_at":"2026-05-30T11:12:00Z"',
      '"source_created":"2026-05-30T11:12:00Z"',
    ]) {
      expect(text).toContain(want);
    }
  });

  it("serializeDocument dispatches on the schema", () => {
    for (const name of ["valid-v2.json", "valid-v3.json"]) {
      expect(serializeDocument(parseDocument(fixture(name)))).toBe(compactFixture(name));
    }
  });

  it("encodeDocument gives the same text as UTF-8 bytes, and refuses invalid state", () => {
    for (const name of ["valid-v2.json", "valid-v3.json"]) {
      const bytes = encodeDocument(parseDocument(fixture(name)));
      expect(Buffer.from(bytes).toString("utf8")).toBe(compactFixture(name));
    }
    const invalid = { ...validSingleOwnerState(), pipelineId: "" };
    expect(() => encodeDocument(invalid)).toThrow(StateError);
  });
});

describe("encodeDocumentSteps", () => {
  it("writes a manifest frozen as parsed from its files, as its canonical text, in steps", () => {
    const files = Array.from({ length: 2500 }, (_, index) => ({
      path: `d/${index % 7}/é "${index}"\u{1F600}.txt`,
      ...fileDigest(`content ${index}`),
    }));
    const built = buildManifest({ id: "big", created: new Date("2026-06-04T11:55:00.5Z"), files });
    const frozen = parseFrozenManifest(serializeManifest(built));
    const state = (manifest: typeof built) => ({
      ...validSingleOwnerState(),
      source: { manifest },
      outputs: manifest.files.map((file) => ({
        path: file.path,
        kind: "source" as const,
        sourcePath: file.path,
        sha256: file.sha256,
        size: file.size,
        createdAt: new Date("2026-06-04T12:00:00Z"),
        updatedAt: new Date("2026-06-04T12:00:00Z"),
      })),
    });
    const steps = encodeDocumentSteps(state(frozen));
    let pauses = 0;
    let next = steps.next();
    for (; !next.done; next = steps.next()) pauses++;
    // Written from the files (frozen) or from the canonical text (built): the same bytes.
    expect(Buffer.from(next.value).toString("utf8")).toBe(serializeSingleOwnerState(state(built)));
    // The outputs pause twice, the manifest's files twice more.
    expect(pauses).toBeGreaterThanOrEqual(5);
    expect(parseDocument(Buffer.from(next.value).toString("utf8"))).toEqual(state(frozen));
  });
});
