import {
  findOutputByPath,
  managedOutputPaths,
  mergeOutputRecords,
  type OutputRecord,
  projectOutputs,
  removeMissingOutputs,
  StateError,
} from "@distributor/state";
import { describe, expect, it } from "vitest";
import { HOUR, validSingleOwnerState } from "./helpers.js";

const created = new Date("2026-05-30T11:12:00Z");
const sha = `sha256:${"b".repeat(64)}`;

function record(path: string, at: Date = created): OutputRecord {
  return {
    path,
    kind: "source",
    sourcePath: path,
    sha256: sha,
    size: 1,
    createdAt: at,
    updatedAt: at,
  };
}

describe("single-owner output helpers", () => {
  it("TestRemoveMissingOutputs: drops missing records and reports whether anything changed", () => {
    const state = validSingleOwnerState();
    state.outputs.push({ ...record("summary.txt"), sha256: `sha256:${"a".repeat(64)}`, size: 10 });
    const { state: next, changed } = removeMissingOutputs(state, ["summary.txt"]);
    expect(changed).toBe(true);
    expect(managedOutputPaths(next)).toEqual(["report.md", "report.html"]);
    expect(managedOutputPaths(state)).toEqual(["report.md", "report.html", "summary.txt"]);

    const unchanged = removeMissingOutputs(next, ["missing.txt"]);
    expect(unchanged.changed).toBe(false);
    expect(managedOutputPaths(unchanged.state)).toEqual(["report.md", "report.html"]);
    expect(removeMissingOutputs(next, []).changed).toBe(false);
  });

  it("TestOutputHelpers: projection keeps created_at, merge keeps retained order and appends new", () => {
    const updatedAt = new Date(created.getTime() + HOUR);
    const retained = [record("old.md"), record("report.md")];
    const projected = projectOutputs(
      [
        { path: "report.md", kind: "source", sourcePath: "report.md", sha256: sha, size: 2 },
        { path: "new.md", kind: "source", sourcePath: "new.md", sha256: sha, size: 3 },
      ],
      retained,
      updatedAt,
    );
    const report = findOutputByPath(projected, "report.md");
    expect(report?.createdAt).toEqual(created);
    expect(report?.updatedAt).toEqual(updatedAt);
    expect(findOutputByPath(projected, "new.md")).toMatchObject({
      createdAt: updatedAt,
      updatedAt,
    });
    expect(findOutputByPath(projected, "absent.md")).toBeUndefined();

    const merged = mergeOutputRecords(retained, projected);
    expect(merged).toHaveLength(3);
    expect(merged.map((o) => o.path)).toEqual(["old.md", "report.md", "new.md"]);
    expect(merged[1]?.size).toBe(2);
    expect(merged[0]).toBe(retained[0]);
  });

  it("projection truncates now to the second and copies only present optional fields", () => {
    const [output] = projectOutputs(
      [
        {
          path: "r.html",
          kind: "generated",
          sourcePath: "r.md",
          transform: "markdown_to_html",
          sha256: sha,
          size: 5,
        },
      ],
      [],
      new Date("2026-06-04T12:00:00.999Z"),
    );
    expect(output).toEqual({
      path: "r.html",
      kind: "generated",
      sourcePath: "r.md",
      transform: "markdown_to_html",
      sha256: sha,
      size: 5,
      createdAt: new Date("2026-06-04T12:00:00Z"),
      updatedAt: new Date("2026-06-04T12:00:00Z"),
    });
    expect(output).not.toHaveProperty("url");
  });

  it("merge refuses a path listed twice in either list", () => {
    expect(() => mergeOutputRecords([record("a"), record("a")], [])).toThrow(
      'state output path "a" is duplicated',
    );
    expect(() => mergeOutputRecords([], [record("b"), record("b")])).toThrow(StateError);
  });
});
