import {
  compare,
  compareSharedRootOwner,
  parseDocument,
  type SingleOwnerState,
  serializeDocument,
} from "@distributor/state";
import { describe, expect, it } from "vitest";
import { fixture, validManifest } from "./helpers.js";

const owner = { pipelineId: "reports", destinationId: "archive" };

describe("parsed documents", () => {
  it("are frozen throughout, embedded manifests included", () => {
    const state = parseDocument(fixture("valid-v2.json")) as SingleOwnerState;
    const [first] = state.outputs;
    if (first === undefined) throw new Error("fixture without outputs");
    expect(() => {
      first.size = -1;
    }).toThrow(TypeError);
    expect(() => state.outputs.push(first)).toThrow(TypeError);
    expect(() => {
      state.pipelineId = "news";
    }).toThrow(TypeError);
    const [file] = state.source.manifest.files;
    expect(() => {
      (file as { size: number }).size = 0;
    }).toThrow(TypeError);
    const shared = parseDocument(fixture("valid-v3.json"));
    expect(Object.isFrozen(shared)).toBe(true);
    expect("owners" in shared && shared.owners.every((o) => Object.isFrozen(o.source))).toBe(true);
  });

  it("compare as their copies do, which are checked again", () => {
    const source = validManifest();
    const parsed = parseDocument(fixture("valid-v2.json"));
    const copy = structuredClone(parsed);
    const status = (state: typeof parsed) => ({ state, hasContents: true });
    expect(compare(source, owner, status(parsed))).toEqual(compare(source, owner, status(copy)));
    // A copy is not known to be valid: changed into an invalid one, compare says so.
    (copy as SingleOwnerState).outputs[0]!.size = -1;
    expect(compare(source, owner, status(copy))).toEqual({
      outcome: "invalid_state",
      reason: "state outputs[0].size must be non-negative",
    });
    const shared = parseDocument(fixture("valid-v3.json"));
    const sharedCopy = structuredClone(shared);
    expect(compareSharedRootOwner(source, owner, status(shared))).toEqual(
      compareSharedRootOwner(source, owner, status(sharedCopy)),
    );
    if ("owners" in sharedCopy) sharedCopy.owners.push(sharedCopy.owners[0]!);
    expect(compareSharedRootOwner(source, owner, status(sharedCopy)).outcome).toBe("invalid_state");
  });

  it("are written as their copies are", () => {
    for (const name of ["valid-v2.json", "valid-v3.json"]) {
      const parsed = parseDocument(fixture(name));
      expect(serializeDocument(parsed)).toBe(serializeDocument(structuredClone(parsed)));
    }
  });

  it("are refused by the writer when an embedded manifest's date was changed into no instant", () => {
    const state = parseDocument(fixture("valid-v2.json")) as SingleOwnerState;
    // A Date cannot be frozen: the one change a parsed document still allows.
    state.source.manifest.created.setTime(Number.NaN);
    expect(() => serializeDocument(state)).toThrow(/state source\.manifest/);
  });
});
