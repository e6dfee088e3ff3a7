import {
  parseDocument,
  parseSharedRootState,
  parseSingleOwnerState,
  serializeSharedRootState,
  serializeSingleOwnerState,
} from "@distributor/state";
import { describe, expect, it } from "vitest";
import { validSharedRootState, validSingleOwnerState } from "./helpers.js";

// `source.signer`: who signed the published manifest (source.signatures). An extension field:
// written only when known, read back as written, and ignored by readers that do not know it.

const SIGNER = {
  principal: "ci@example.com",
  fingerprint: "SHA256:KtetNUqCytfftdGVpyclXY8l9hMKQJypf/GfYQN5kvY",
};

describe("source.signer", () => {
  it("round-trips in single-owner state, after the manifest", () => {
    const state = validSingleOwnerState();
    state.source.signer = { ...SIGNER };
    const text = serializeSingleOwnerState(state);
    expect(Object.keys(JSON.parse(text).source)).toEqual(["manifest", "signer"]);
    expect(JSON.parse(text).source.signer).toEqual(SIGNER);
    const read = parseSingleOwnerState(text);
    expect(read.source.signer).toEqual(SIGNER);
    expect(serializeSingleOwnerState(read)).toBe(text);
  });

  it("round-trips per owner in shared-root state", () => {
    const state = validSharedRootState();
    state.owners[0]!.source.signer = { ...SIGNER };
    const text = serializeSharedRootState(state);
    const read = parseSharedRootState(text);
    expect(read.owners[0]?.source.signer).toEqual(SIGNER);
    expect(read.owners.slice(1).every((owner) => owner.source.signer === undefined)).toBe(true);
    expect(serializeSharedRootState(read)).toBe(text);
  });

  it("is absent from state without a signer, which serialises as before", () => {
    const text = serializeSingleOwnerState(validSingleOwnerState());
    expect(Object.keys(JSON.parse(text).source)).toEqual(["manifest"]);
    expect(parseSingleOwnerState(text).source).not.toHaveProperty("signer");
  });

  it("refuses a signer without a principal or with a fingerprint ssh-keygen would not print", () => {
    const state = validSingleOwnerState();
    state.source.signer = { principal: "", fingerprint: SIGNER.fingerprint };
    expect(() => serializeSingleOwnerState(state)).toThrow(
      "state source.signer.principal is required",
    );
    state.source.signer = { principal: "ci", fingerprint: "MD5:aa:bb" };
    expect(() => serializeSingleOwnerState(state)).toThrow(
      "state source.signer.fingerprint must be",
    );
    const json = JSON.parse(serializeSingleOwnerState(validSingleOwnerState()));
    json.source.signer = { principal: "ci" };
    expect(() => parseDocument(JSON.stringify(json))).toThrow(
      "state source.signer.fingerprint is required",
    );
    json.source.signer = "ci";
    expect(() => parseDocument(JSON.stringify(json))).toThrow(
      "state source.signer must be an object",
    );
  });

  it("keeps ignoring unknown fields beside it", () => {
    const json = JSON.parse(serializeSingleOwnerState(validSingleOwnerState()));
    json.source.signer = { ...SIGNER, key_type: "ssh-ed25519" };
    json.source.provenance = { slsa: 1 };
    expect(parseSingleOwnerState(JSON.stringify(json)).source.signer).toEqual(SIGNER);
  });
});
