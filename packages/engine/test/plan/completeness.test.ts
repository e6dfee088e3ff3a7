import { buildManifest } from "@distributor/bundle";
import { describe, expect, it } from "vitest";
import { type CompletenessRecord, completenessGaps } from "../../src/plan/completeness.js";
import type { OutputSelection } from "../../src/plan/outputs.js";

const digest = (n: number) => `sha256:${n.toString(16).padStart(64, "0")}`;
const manifest = buildManifest({
  id: "reports.example",
  created: new Date("2026-06-04T11:55:00Z"),
  files: ["a.txt", "b/c.txt", "b/d.txt", "e.md"].map((path, index) => ({
    path,
    sha256: digest(index + 1),
    size: index + 10,
  })),
});
const planned: OutputSelection[] = manifest.files.map((file) => ({
  path: file.path,
  kind: "source",
  sourcePath: file.path,
}));
const records: CompletenessRecord[] = manifest.files.map((file) => ({
  path: file.path,
  kind: "source",
  sourcePath: file.path,
  sha256: file.sha256,
  size: file.size,
}));

describe("completenessGaps", () => {
  // Records aligned with the planned outputs are compared pairwise; any other shape through maps.
  it("finds nothing when the records are the planned outputs, in order or not", () => {
    const none = { missing: [], changed: [], retired: [] };
    expect(completenessGaps(planned, manifest, records, "replace")).toEqual(none);
    expect(completenessGaps(planned, manifest, [...records].reverse(), "replace")).toEqual(none);
  });

  it("finds the same changed outputs aligned or not", () => {
    const changed = records.map((record, index) =>
      index === 2
        ? { ...record, sha256: digest(99) }
        : index === 0
          ? { ...record, size: 1 }
          : record,
    );
    const expected = { missing: [], changed: ["a.txt", "b/d.txt"], retired: [] };
    expect(completenessGaps(planned, manifest, changed, "replace")).toEqual(expected);
    expect(completenessGaps(planned, manifest, [...changed].reverse(), "replace")).toEqual(
      expected,
    );
  });

  it("finds an output made from another manifest entry than the one at its index", () => {
    // e.md is made from a.txt: its record describes a.txt's bytes, so it is complete.
    const shifted = planned.map((output) =>
      output.path === "e.md" ? { ...output, sourcePath: "a.txt" } : output,
    );
    const described = records.map((record) =>
      record.path === "e.md"
        ? { ...record, sourcePath: "a.txt", sha256: digest(1), size: 10 }
        : record,
    );
    expect(completenessGaps(shifted, manifest, described, "replace")).toEqual({
      missing: [],
      changed: [],
      retired: [],
    });
    expect(completenessGaps(shifted, manifest, records, "replace").changed).toEqual(["e.md"]);
  });

  it("finds missing and retired outputs when the records are not the planned ones", () => {
    const fewer = records.filter((record) => record.path !== "b/c.txt");
    const extra = [...records, { ...records[0]!, path: "z.txt" }];
    expect(completenessGaps(planned, manifest, fewer, "replace").missing).toEqual(["b/c.txt"]);
    expect(completenessGaps(planned, manifest, extra, "replace").retired).toEqual(["z.txt"]);
    expect(completenessGaps(planned, manifest, extra, "merge").retired).toEqual([]);
  });
});
