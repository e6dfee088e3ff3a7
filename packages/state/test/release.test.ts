import {
  isReleaseId,
  newReleaseId,
  parseSingleOwnerState,
  peekReplacementMarker,
  peekSingleOwner,
  peekSourceDigest,
  peekStateRelease,
  serializeSingleOwnerState,
} from "@distributor/state";
import { describe, expect, it } from "vitest";
import { validSingleOwnerState } from "./helpers.js";

// `release`: under the release layout, which release a single-owner state's records describe.
// An extension field: written only when set, read back as written.

describe("release", () => {
  it("round-trips in single-owner state, before the outputs", () => {
    const state = validSingleOwnerState();
    const id = newReleaseId(new Date("2026-12-04T09:38:19.123Z"));
    expect(id).toMatch(/^20261204T093819\.123Z-[0-9a-f]{4}$/);
    state.release = { id };
    const text = serializeSingleOwnerState(state);
    const keys = Object.keys(JSON.parse(text));
    expect(keys.indexOf("release")).toBe(keys.indexOf("outputs") - 1);
    const read = parseSingleOwnerState(text);
    expect(read.release).toEqual({ id });
    expect(serializeSingleOwnerState(read)).toBe(text);
  });

  it("is absent unless set", () => {
    const text = serializeSingleOwnerState(validSingleOwnerState());
    expect(JSON.parse(text).release).toBeUndefined();
    expect(parseSingleOwnerState(text).release).toBeUndefined();
  });

  it("refuses an id that is not a release id, naming the field", () => {
    const document = JSON.parse(serializeSingleOwnerState(validSingleOwnerState()));
    document.release = { id: "../../etc" };
    expect(() => parseSingleOwnerState(JSON.stringify(document))).toThrow(/state release\.id/);
    document.release = {};
    expect(() => parseSingleOwnerState(JSON.stringify(document))).toThrow(/state release\.id/);
  });

  it("sorts ids by the time they were made", () => {
    const ids = [3, 1, 2].map((second) =>
      newReleaseId(new Date(Date.UTC(2026, 0, 1, 0, 0, second))),
    );
    expect([...ids].sort()).toEqual([ids[1], ids[2], ids[0]]);
    expect(ids.every(isReleaseId)).toBe(true);
    expect(isReleaseId("current")).toBe(false);
  });
});

describe("peekStateRelease", () => {
  it("finds the release a state records, compact or indented, and nothing in a manifest or path", () => {
    const state = validSingleOwnerState();
    const id = newReleaseId(new Date("2026-12-04T09:38:19.123Z"));
    expect(peekStateRelease(serializeSingleOwnerState(state))).toBeUndefined();
    state.release = { id };
    const text = serializeSingleOwnerState(state);
    expect(peekStateRelease(text)).toBe(id);
    expect(peekStateRelease(JSON.stringify(JSON.parse(text), null, 2))).toBe(id);
    // A path that spells the member is escaped in the text: never taken for it.
    const tricky = validSingleOwnerState();
    const output = tricky.outputs[0];
    if (output === undefined) throw new Error("fixture has no output");
    output.path = `"release":{"id":"${id}"}`;
    expect(peekStateRelease(JSON.stringify(JSON.parse(serializeSingleOwnerState(tricky))))).toBe(
      undefined,
    );
  });
});

describe("peekSourceDigest", () => {
  it("finds the recorded source's digest, behind the longest id", () => {
    const state = validSingleOwnerState();
    const digest = state.source.manifest.digest;
    expect(peekSourceDigest(serializeSingleOwnerState(state))).toBe(digest);
    expect(peekSourceDigest(Buffer.from(serializeSingleOwnerState(state)))).toBe(digest);
    state.source.manifest.id = `a${"b".repeat(127)}`;
    expect(peekSourceDigest(serializeSingleOwnerState(state))).toBe(digest);
    expect(peekSourceDigest("{}")).toBeUndefined();
  });
});

describe("peekReplacementMarker and peekSingleOwner", () => {
  it("find the marker and the owner a state's text records", () => {
    const state = validSingleOwnerState();
    const text = serializeSingleOwnerState(state);
    expect(peekReplacementMarker(text)).toBe(false);
    expect(peekSingleOwner(text)).toEqual({
      pipelineId: state.pipelineId,
      destinationId: state.destinationId,
    });
    state.replacing = { runId: "run-1", startedAt: new Date("2026-06-04T12:00:00Z") };
    expect(peekReplacementMarker(serializeSingleOwnerState(state))).toBe(true);
    expect(peekSingleOwner("{}")).toBeUndefined();
  });
});

describe("peeks over stored bytes", () => {
  it("read the same from the bytes as from the text, non-ASCII paths included", () => {
    const state = validSingleOwnerState();
    const output = state.outputs[0];
    if (output === undefined) throw new Error("fixture has no output");
    output.path = "café/naïve-📄.txt";
    state.release = { id: newReleaseId(new Date("2026-12-04T09:38:19.123Z")) };
    const text = serializeSingleOwnerState(state);
    const bytes = new TextEncoder().encode(text);
    expect(peekStateRelease(bytes)).toBe(peekStateRelease(text));
    expect(peekSingleOwner(bytes)).toEqual(peekSingleOwner(text));
    expect(peekReplacementMarker(bytes)).toBe(false);
  });
});
