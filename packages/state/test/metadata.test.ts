import {
  parseDocument,
  parseSharedRootState,
  parseSingleOwnerState,
  sameStoredForm,
  serializeSharedRootState,
  serializeSingleOwnerState,
} from "@distributor/state";
import { describe, expect, it } from "vitest";
import { compactFixture, fixture, fixtureJson } from "./helpers.js";

const GZIP_DIGEST = `sha256:${"a".repeat(64)}`;

/** The schema 2 fixture with object metadata on its first output (and an encoding on request). */
function withMetadata(metadata: Record<string, unknown>, decoded?: Record<string, unknown>) {
  const document = fixtureJson("valid-v2.json") as { outputs: Record<string, unknown>[] };
  const output = document.outputs[0] as Record<string, unknown>;
  output.metadata = metadata;
  if (decoded !== undefined) output.decoded = decoded;
  return JSON.stringify(document, null, 2);
}

describe("object metadata in output records", () => {
  it("reads, writes back and keeps the documented key order", () => {
    const text = withMetadata(
      {
        cache_control: "max-age=60",
        content_type: "text/plain; charset=utf-8",
        content_disposition: "attachment",
        content_encoding: "gzip",
      },
      { sha256: GZIP_DIGEST, size: 16 },
    );
    const state = parseSingleOwnerState(text);
    expect(state.outputs[0]?.metadata).toEqual({
      cacheControl: "max-age=60",
      contentType: "text/plain; charset=utf-8",
      contentDisposition: "attachment",
      contentEncoding: "gzip",
    });
    expect(state.outputs[0]?.decoded).toEqual({ sha256: GZIP_DIGEST, size: 16 });
    const written = serializeSingleOwnerState(state);
    const output = JSON.parse(written).outputs[0];
    expect(Object.keys(output)).toEqual([
      "path",
      "kind",
      "source_path",
      "sha256",
      "size",
      "metadata",
      "decoded",
      "created_at",
      "updated_at",
    ]);
    expect(Object.keys(output.metadata)).toEqual([
      "cache_control",
      "content_type",
      "content_disposition",
      "content_encoding",
    ]);
    expect(parseSingleOwnerState(written)).toEqual(state);
  });

  it("leaves states without metadata exactly as they were", () => {
    const text = fixture("valid-v2.json");
    const state = parseSingleOwnerState(text);
    expect(state.outputs.every((output) => output.metadata === undefined)).toBe(true);
    expect(serializeSingleOwnerState(state)).toBe(compactFixture("valid-v2.json"));
    const shared = fixture("valid-v3.json");
    expect(serializeSharedRootState(parseSharedRootState(shared))).toBe(
      compactFixture("valid-v3.json"),
    );
  });

  it("reads an empty metadata object as none and omits it when writing", () => {
    const state = parseSingleOwnerState(withMetadata({}));
    expect(state.outputs[0]?.metadata).toBeUndefined();
    expect(serializeSingleOwnerState(state)).toBe(compactFixture("valid-v2.json"));
  });

  it("records metadata on shared-root outputs too", () => {
    const document = fixtureJson("valid-v3.json") as { outputs: Record<string, unknown>[] };
    (document.outputs[0] as Record<string, unknown>).metadata = { cache_control: "no-cache" };
    const state = parseSharedRootState(JSON.stringify(document));
    expect(state.outputs[0]?.metadata).toEqual({ cacheControl: "no-cache" });
    expect(JSON.parse(serializeSharedRootState(state)).outputs[0].metadata).toEqual({
      cache_control: "no-cache",
    });
  });

  it.each([
    [
      "an encoding without the decoded digest",
      withMetadata({ content_encoding: "br" }),
      "state outputs[0].decoded is required when metadata.content_encoding is set",
    ],
    [
      "a decoded digest without an encoding",
      withMetadata({ cache_control: "no-cache" }, { sha256: GZIP_DIGEST, size: 3 }),
      "state outputs[0].decoded is allowed only when metadata.content_encoding is set",
    ],
    [
      "a bad decoded digest",
      withMetadata({ content_encoding: "gzip" }, { sha256: "sha256:zz", size: 3 }),
      "state outputs[0].decoded.sha256: digest must be sha256:<64 lowercase hex>",
    ],
    [
      "a negative decoded size",
      withMetadata({ content_encoding: "gzip" }, { sha256: GZIP_DIGEST, size: -1 }),
      "state outputs[0].decoded.size must be a non-negative integer",
    ],
    [
      "a header value with a line break",
      withMetadata({ cache_control: "max-age=60\r\nX-Evil: 1" }),
      "state outputs[0].metadata.cache_control must not contain control characters",
    ],
    [
      "a metadata value that is not a string",
      withMetadata({ cache_control: 60 }),
      "state outputs[0].metadata.cache_control must be a string",
    ],
  ])("refuses %s", (_name, text, message) => {
    expect(() => parseDocument(text)).toThrow(message);
  });

  it("compares the stored form of two records", () => {
    expect(sameStoredForm({}, { metadata: {} })).toBe(true);
    expect(sameStoredForm({}, { metadata: { cacheControl: "no-cache" } })).toBe(false);
    const gzip = {
      metadata: { contentEncoding: "gzip" },
      decoded: { sha256: GZIP_DIGEST, size: 2 },
    };
    expect(sameStoredForm(gzip, { ...gzip })).toBe(true);
    expect(sameStoredForm(gzip, { ...gzip, decoded: { sha256: GZIP_DIGEST, size: 3 } })).toBe(
      false,
    );
  });
});
