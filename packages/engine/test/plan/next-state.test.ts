import { buildManifest } from "@distributor/bundle";
import type { SingleOwnerState } from "@distributor/state";
import { describe, expect, it } from "vitest";
import { updatedRecordsDocument } from "../../src/plan/next-state.js";
import type { PlannedOutput } from "../../src/plan/outputs.js";

const digest = (n: number) => `sha256:${n.toString(16).padStart(64, "0")}`;
const at = new Date("2026-06-04T11:55:00Z");
const manifest = buildManifest({
  id: "reports.example",
  created: at,
  files: [{ path: "report.md", sha256: digest(1), size: 10 }],
});

function state(): SingleOwnerState {
  return {
    schemaVersion: 2,
    pipelineId: "p",
    destinationId: "d",
    publishedAt: at,
    createdAt: at,
    updatedAt: at,
    state: { mode: "single_owner" },
    reconciliation: { mode: "replace" },
    source: { manifest },
    outputs: [
      {
        path: "report.html",
        kind: "generated",
        sourcePath: "report.md",
        transform: "markdown_to_html",
        url: "https://cdn.example/old/report.html",
        sha256: digest(2),
        size: 20,
        metadata: { cacheControl: "max-age=60" },
        createdAt: at,
        updatedAt: at,
      },
    ],
  };
}

describe("updatedRecordsDocument", () => {
  it("replaces what the new projection says and keeps what it does not, as a record updated in place", () => {
    const now = new Date("2026-06-05T00:00:00Z");
    // A metadata change planned without a URL (none configured now) and without metadata.
    const planned: PlannedOutput = {
      path: "report.html",
      kind: "generated",
      sourcePath: "report.md",
      sha256: digest(3),
      size: 30,
    };
    const owner = { pipelineId: "p", destinationId: "d" };
    const next = updatedRecordsDocument(state(), owner, [planned], now) as SingleOwnerState;
    expect(next.outputs).toEqual([
      {
        path: "report.html",
        kind: "generated",
        sourcePath: "report.md",
        transform: "markdown_to_html",
        url: "https://cdn.example/old/report.html",
        sha256: digest(3),
        size: 30,
        createdAt: at,
        updatedAt: now,
      },
    ]);
    expect(next.outputs[0]?.metadata).toBeUndefined();
  });
});
