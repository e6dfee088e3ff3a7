import { describe, expect, it } from "vitest";
import { chunkName } from "../src/resumable/chunks.js";
import { type Chunk, coverage, parseChunk } from "../src/testing/index.js";

// The coverage of chunk objects (S3 staging): what a partial holds from 0, whatever duplicates,
// overlaps or holes the writers left.

const chunk = (start: number, end: number, writer = "a"): Chunk =>
  parseChunk(chunkName(start, end - start, "c0ffee", writer)) as Chunk;

describe("chunk coverage", () => {
  it("round-trips names and refuses others", () => {
    expect(chunk(5, 12)).toMatchObject({ start: 5, end: 12, incarnation: "c0ffee" });
    expect(chunkName(5, 7, "c0ffee", "ab")).toBe("chunk-0000000000000005-7-c0ffee-ab");
    for (const name of [
      "info.json",
      "chunk-5-7-ab",
      "chunk-0000000000000005-0-ab",
      "chunk-0000000000000005-7-c0ffee-A",
      // Written by a version without incarnations: never part of a partial of this one.
      "chunk-0000000000000005-7-ab",
    ]) {
      expect(parseChunk(name), name).toBeUndefined();
    }
  });

  it("is the contiguous run from 0, read in order with overlaps skipped", () => {
    expect(coverage([])).toEqual({ covered: 0, steps: [] });
    expect(coverage([chunk(10, 20)]).covered).toBe(0);
    const pieces = [chunk(0, 10), chunk(10, 20), chunk(5, 25, "b"), chunk(25, 30), chunk(40, 50)];
    const { covered, steps } = coverage(pieces);
    expect(covered).toBe(30);
    expect(steps.map((step) => [step.chunk.start, step.chunk.end, step.skip])).toEqual([
      [0, 10, 0],
      [5, 25, 5],
      [25, 30, 0],
    ]);
  });

  it("does not change with duplicates or the order listed", () => {
    const base = [chunk(0, 8), chunk(8, 16), chunk(16, 20)];
    const noisy = [...base, chunk(0, 8, "b"), chunk(8, 16, "c"), chunk(4, 12, "d")].reverse();
    expect(coverage(noisy).covered).toBe(coverage(base).covered);
    let bytes = 0;
    for (const step of coverage(noisy).steps)
      bytes += step.chunk.end - step.chunk.start - step.skip;
    expect(bytes).toBe(20);
  });
});
