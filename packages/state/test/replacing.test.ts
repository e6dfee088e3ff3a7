import {
  parseDocument,
  parseSharedRootState,
  parseSingleOwnerState,
  replacementMarker,
  replacementMarkers,
  StateError,
  serializeDocument,
  serializeSharedRootState,
  serializeSingleOwnerState,
  withoutReplacementMarkers,
  withReplacementMarker,
} from "@distributor/state";
import { describe, expect, it } from "vitest";
import { fixtureJson, validSharedRootState, validSingleOwnerState } from "./helpers.js";

const MARKER = { runId: "run-1", startedAt: new Date("2026-12-02T10:00:00Z") };

describe("the replacing marker", () => {
  it("round-trips in single-owner state, before outputs, and is absent otherwise", () => {
    const state = validSingleOwnerState();
    const owner = { pipelineId: state.pipelineId, destinationId: state.destinationId };
    const marked = withReplacementMarker(state, owner, MARKER);
    const text = serializeDocument(marked);
    expect(text).toContain(
      '"replacing":{"run_id":"run-1","started_at":"2026-12-02T10:00:00Z"},"outputs"',
    );
    const parsed = parseSingleOwnerState(text);
    expect(parsed.replacing).toEqual(MARKER);
    expect(replacementMarker(parsed, owner)).toEqual(MARKER);
    // Any owner scope reads a single-owner document's marker: it covers the whole document.
    expect(replacementMarker(parsed, { pipelineId: "x", destinationId: "y" })).toEqual(MARKER);
    const unmarked = withoutReplacementMarkers(parsed);
    expect(serializeSingleOwnerState(unmarked as typeof state)).toBe(
      serializeSingleOwnerState(state),
    );
    expect(serializeSingleOwnerState(state)).not.toContain("replacing");
  });

  it("belongs to one owner of a shared root", () => {
    const state = validSharedRootState();
    const [first, second] = state.owners;
    if (first === undefined || second === undefined) throw new Error("fixture has two owners");
    const marked = withReplacementMarker(state, first.scope, MARKER);
    const parsed = parseSharedRootState(serializeDocument(marked));
    expect(replacementMarker(parsed, first.scope)).toEqual(MARKER);
    expect(replacementMarker(parsed, second.scope)).toBeUndefined();
    expect(replacementMarkers(parsed)).toEqual([{ owner: first.scope, marker: MARKER }]);
    expect(serializeSharedRootState(withoutReplacementMarkers(parsed) as typeof state)).toBe(
      serializeSharedRootState(state),
    );
  });

  it("is refused without a run id or a valid start time", () => {
    const document = fixtureJson("valid-v2.json");
    document.replacing = { run_id: "", started_at: "2026-12-02T10:00:00Z" };
    expect(() => parseDocument(JSON.stringify(document))).toThrow(StateError);
    expect(() => parseDocument(JSON.stringify(document))).toThrow(
      "state replacing.run_id is required",
    );
    document.replacing = { run_id: "r", started_at: "yesterday" };
    expect(() => parseDocument(JSON.stringify(document))).toThrow("state replacing.started_at");
  });
});
