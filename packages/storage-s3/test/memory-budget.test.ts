import { describe, expect, it } from "vitest";
import { MemoryBudget } from "../src/memory-budget.js";

describe("the upload memory budget", () => {
  it("lets uploads through while they fit, and the next one when room is given back", async () => {
    const budget = new MemoryBudget(10);
    const order: string[] = [];
    await budget.take(6, undefined);
    await budget.take(4, undefined);
    const third = budget.take(3, undefined).then(() => order.push("third"));
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(order).toEqual([]);
    budget.give(4);
    await third;
    expect(order).toEqual(["third"]);
  });

  it("always lets one upload through alone, even larger than the budget", async () => {
    const budget = new MemoryBudget(10);
    await budget.take(50, undefined);
    let second = false;
    const waiting = budget.take(1, undefined).then(() => {
      second = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(second).toBe(false);
    budget.give(50);
    await waiting;
    expect(second).toBe(true);
  });

  it("stops waiting when the upload is cancelled", async () => {
    const budget = new MemoryBudget(10);
    await budget.take(10, undefined);
    const controller = new AbortController();
    const waiting = budget.take(5, controller.signal);
    controller.abort(new Error("interrupted"));
    await expect(waiting).rejects.toThrow("interrupted");
    budget.give(10);
    await budget.take(10, undefined);
  });
});
