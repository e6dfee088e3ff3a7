import { buildManifest } from "@distributor/bundle";
import { encodeDocument, StateError } from "@distributor/state";
import { afterAll, describe, expect, it } from "vitest";
import { readStateFile } from "../../src/index.js";
import {
  newBackend,
  removeTempBackends,
  singleOwnerState,
  useBackendKind,
} from "../../src/testing/fixtures.js";

afterAll(removeTempBackends);

/** The bytes of a valid state of `count` outputs named with two-byte characters. */
function bigState(count: number): Uint8Array {
  const manifest = buildManifest({
    id: "reports.example",
    created: new Date("2026-06-04T11:55:00Z"),
    files: Array.from({ length: count }, (_, index) => ({
      path: `é/${"é".repeat(40)}-${index}.txt`,
      sha256: `sha256:${index.toString(16).padStart(64, "0")}`,
      size: index,
    })),
  });
  return encodeDocument(singleOwnerState(manifest));
}

describe("reading a state file of several megabytes", () => {
  it("decodes it in chunks, characters cut at a chunk's end included", async () => {
    useBackendKind("local");
    const backend = newBackend();
    const bytes = bigState(40_000);
    // Over two of the 4 MiB chunks, with two-byte characters throughout: some chunk ends inside
    // one of them.
    expect(bytes.length).toBeGreaterThan(8 * 1024 * 1024);
    const chunk = 4 * 1024 * 1024;
    const cut = [chunk, 2 * chunk].filter((at) => ((bytes[at] ?? 0) & 0xc0) === 0x80);
    expect(cut.length).toBeGreaterThan(0);
    await backend.writeFile("reports/.distributor.json", bytes);
    const read = await readStateFile(backend, "reports/.distributor.json", undefined, {
      value: 64 * 1024 * 1024,
    });
    expect(read.text).toBe(Buffer.from(bytes).toString("utf8"));
    expect(read.document.outputs).toHaveLength(40_000);
  });

  it("refuses bytes that are not UTF-8 beyond the first chunk", async () => {
    useBackendKind("local");
    const backend = newBackend();
    const bytes = Buffer.from(bigState(40_000));
    // A lone continuation byte inside a path, past the first 4 MiB.
    const at = bytes.indexOf("é", 6 * 1024 * 1024, "utf8");
    bytes[at] = 0x80;
    await backend.writeFile("reports/.distributor.json", bytes);
    const failure = await readStateFile(backend, "reports/.distributor.json", undefined, {
      value: 64 * 1024 * 1024,
    }).catch((error) => error);
    expect(failure).toBeInstanceOf(StateError);
    expect(failure.message).toMatch(/is not valid state: not UTF-8 text$/);
  });

  it("drops a byte order mark before the text, as a strict TextDecoder does", async () => {
    useBackendKind("local");
    const backend = newBackend();
    const bytes = bigState(10);
    await backend.writeFile(
      "reports/.distributor.json",
      Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), bytes]),
    );
    const read = await readStateFile(backend, "reports/.distributor.json");
    expect(read.text).toBe(Buffer.from(bytes).toString("utf8"));
    expect(read.document.outputs).toHaveLength(10);
  });
});
