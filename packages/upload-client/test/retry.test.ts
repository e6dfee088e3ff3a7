import { describe, expect, it } from "vitest";
import { idempotencyKeyProblem } from "../src/idempotency.js";
import { DEFAULT_RETRY_POLICY, parseRetryAfter, retryDelay, retryPolicy } from "../src/retry.js";

describe("parseRetryAfter", () => {
  const now = Date.parse("2026-06-04T12:00:00Z");

  it("reads delay-seconds", () => {
    expect(parseRetryAfter("0", now)).toBe(0);
    expect(parseRetryAfter("7", now)).toBe(7000);
    expect(parseRetryAfter(" 120 ", now)).toBe(120_000);
  });

  it("reads an HTTP date, a past one as now", () => {
    expect(parseRetryAfter("Thu, 04 Jun 2026 12:00:30 GMT", now)).toBe(30_000);
    expect(parseRetryAfter("Thu, 04 Jun 2026 11:00:00 GMT", now)).toBe(0);
  });

  it("ignores what it cannot read", () => {
    expect(parseRetryAfter(null, now)).toBeUndefined();
    expect(parseRetryAfter("", now)).toBeUndefined();
    expect(parseRetryAfter("-5", now)).toBeUndefined();
    expect(parseRetryAfter("1.5", now)).toBeUndefined();
    expect(parseRetryAfter("soon", now)).toBeUndefined();
  });
});

describe("retryDelay", () => {
  const policy = { ...DEFAULT_RETRY_POLICY, baseDelayMs: 100, maxDelayMs: 1000 };

  it("doubles per retry with half of it random, up to the maximum", () => {
    expect(
      [1, 2, 3, 4, 5, 6].map((retry) => retryDelay(retry, undefined, policy, () => 0)),
    ).toEqual([50, 100, 200, 400, 500, 500]);
    expect([1, 2, 3, 4, 5].map((retry) => retryDelay(retry, undefined, policy, () => 1))).toEqual([
      100, 200, 400, 800, 1000,
    ]);
  });

  it("waits at least what Retry-After asked for, even beyond the maximum", () => {
    expect(retryDelay(1, 5000, policy, () => 1)).toBe(5000);
    expect(retryDelay(5, 10, policy, () => 1)).toBe(1000);
  });
});

describe("retryPolicy", () => {
  it("takes a retry count or a partial policy", () => {
    expect(retryPolicy(0).attempts).toBe(1);
    expect(retryPolicy(3).attempts).toBe(4);
    expect(retryPolicy({ maxElapsedMs: 10 })).toEqual({
      ...DEFAULT_RETRY_POLICY,
      maxElapsedMs: 10,
    });
    expect(retryPolicy(undefined, { ...DEFAULT_RETRY_POLICY, attempts: 9 }).attempts).toBe(9);
  });

  it("refuses values that make no sense", () => {
    expect(() => retryPolicy(-1)).toThrow(/attempts must be an integer of at least 1/);
    expect(() => retryPolicy({ baseDelayMs: 0.5 })).toThrow(/baseDelayMs/);
  });
});

describe("idempotencyKeyProblem", () => {
  it("accepts 1–255 visible ASCII characters and names what is wrong otherwise", () => {
    expect(idempotencyKeyProblem("a")).toBeUndefined();
    expect(idempotencyKeyProblem("!~build-42:main")).toBeUndefined();
    expect(idempotencyKeyProblem("k".repeat(255))).toBeUndefined();
    expect(idempotencyKeyProblem("")).toMatch(/empty/);
    expect(idempotencyKeyProblem("k".repeat(256))).toMatch(/at most 255/);
    expect(idempotencyKeyProblem("a b")).toMatch(/visible ASCII/);
    expect(idempotencyKeyProblem("tab\t")).toMatch(/visible ASCII/);
    expect(idempotencyKeyProblem("ключ")).toMatch(/visible ASCII/);
  });
});
