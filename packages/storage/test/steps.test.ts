import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { runInSlices, runSteps, type Steps, sortSteps } from "../src/steps.js";

/** `count` steps of `stepMs` milliseconds of busy work each, returning `count`. */
function* busySteps(count: number, stepMs: number): Steps<number> {
  for (let step = 0; step < count; step++) {
    const until = performance.now() + stepMs;
    while (performance.now() < until) {
      // Synchronous work, as parsing a big document is.
    }
    yield;
  }
  return count;
}

describe("steps", () => {
  it("runSteps runs them to the end at once", () => {
    let ticks = 0;
    const timer = setInterval(() => ticks++, 1);
    try {
      expect(runSteps(busySteps(20, 2))).toBe(20);
      expect(ticks).toBe(0);
    } finally {
      clearInterval(timer);
    }
  });

  it("runInSlices lets timers fire between slices of work", async () => {
    let ticks = 0;
    const timer = setInterval(() => ticks++, 5);
    try {
      // 400 ms of work in steps of 5 ms: a turn of the loop at least every 50 ms or so.
      expect(await runInSlices(busySteps(80, 5))).toBe(80);
    } finally {
      clearInterval(timer);
    }
    expect(ticks).toBeGreaterThanOrEqual(4);
  });
});

describe("sortSteps", () => {
  it("sorts as Array.prototype.sort does, stably, pausing between runs and merges", () => {
    fc.assert(
      fc.property(fc.array(fc.nat({ max: 50 }), { maxLength: 40_000 }), (keys) => {
        const items = keys.map((key, index) => ({ key, index }));
        const expected = [...items].sort((a, b) => a.key - b.key);
        const steps = sortSteps(items, (a, b) => a.key - b.key);
        let pauses = 0;
        let next = steps.next();
        for (; !next.done; next = steps.next()) pauses++;
        expect(next.value).toBe(items);
        expect(items).toEqual(expected);
        if (items.length > 8192) expect(pauses).toBeGreaterThan(items.length / 8192);
      }),
      { numRuns: 40 },
    );
  });
});
