import { describe, expect, it } from "vitest";
import { formatTimestamp, parseTimestamp, truncateToSeconds } from "../src/timestamp.js";

function parsed(text: string): string {
  const result = parseTimestamp(text);
  if (!result.ok) throw new Error(`${text}: ${result.problem}`);
  return result.date.toISOString();
}

function problem(text: string): string {
  const result = parseTimestamp(text);
  if (result.ok) throw new Error(`${text} unexpectedly parsed`);
  return result.problem;
}

describe("parseTimestamp", () => {
  it("normalises offsets to UTC", () => {
    expect(parsed("2026-06-04T11:55:00Z")).toBe("2026-06-04T11:55:00.000Z");
    expect(parsed("2026-06-04T13:55:00+02:00")).toBe("2026-06-04T11:55:00.000Z");
    expect(parsed("2026-06-04T06:25:00-05:30")).toBe("2026-06-04T11:55:00.000Z");
    expect(parsed("2026-01-01T00:30:00+01:00")).toBe("2025-12-31T23:30:00.000Z");
  });

  it("keeps milliseconds and truncates finer fractions", () => {
    expect(parsed("2026-06-04T11:55:00.5Z")).toBe("2026-06-04T11:55:00.500Z");
    expect(parsed("2026-06-04T11:55:00.123999999Z")).toBe("2026-06-04T11:55:00.123Z");
  });

  it("accepts 29 February in leap years only", () => {
    expect(parsed("2024-02-29T00:00:00Z")).toBe("2024-02-29T00:00:00.000Z");
    expect(parsed("2000-02-29T00:00:00Z")).toBe("2000-02-29T00:00:00.000Z");
    expect(problem("2026-02-29T00:00:00Z")).toBe("day 29 is out of range for 2026-02");
    expect(problem("1900-02-29T00:00:00Z")).toBe("day 29 is out of range for 1900-02");
  });

  it("keeps years below 100 literal", () => {
    expect(parsed("0050-03-01T00:00:00Z")).toBe("0050-03-01T00:00:00.000Z");
  });

  it.each([
    ["2026-02-30T00:00:00Z", "day 30 is out of range for 2026-02"],
    ["2026-04-31T00:00:00Z", "day 31 is out of range for 2026-04"],
    ["2026-13-01T00:00:00Z", "month 13 is out of range"],
    ["2026-00-01T00:00:00Z", "month 00 is out of range"],
    ["2026-06-04T24:00:00Z", "hour 24 is out of range"],
    ["2026-06-04T11:60:00Z", "minute 60 is out of range"],
    ["2026-06-04T11:55:60Z", "second 60 is out of range"],
    ["2026-06-04T11:55:00+24:00", "offset +24:00 is out of range"],
    ["0000-01-01T00:00:00+01:00", "falls outside the years 0000–9999 in UTC"],
  ])("rejects %s", (text, expected) => {
    expect(problem(text)).toBe(expected);
  });

  it.each([
    "2026-06-04T11:55:00",
    "2026-06-04 11:55:00Z",
    "2026-06-04t11:55:00z",
    "2026-06-04T11:55Z",
    "2026-06-04T11:55:00+0200",
    "2026-06-04T11:55:00.Z",
    "2026-06-04",
    "26-06-04T11:55:00Z",
    " 2026-06-04T11:55:00Z",
    "2026-06-04T11:55:00Z\n",
  ])("rejects %j as not RFC 3339 with an offset", (text) => {
    expect(problem(text)).toMatch(/^not in the form/);
  });
});

describe("formatTimestamp", () => {
  it("writes second precision when there are no milliseconds", () => {
    expect(formatTimestamp(new Date("2026-06-04T11:55:00Z"))).toBe("2026-06-04T11:55:00Z");
  });

  it("keeps milliseconds when present", () => {
    expect(formatTimestamp(new Date("2026-06-04T11:55:00.250Z"))).toBe("2026-06-04T11:55:00.250Z");
  });

  it("round-trips through parseTimestamp", () => {
    for (const text of [
      "2026-06-04T11:55:00Z",
      "1999-12-31T23:59:59.999Z",
      "0001-01-01T00:00:00Z",
    ]) {
      const result = parseTimestamp(text);
      expect(result.ok && formatTimestamp(result.date)).toBe(text);
    }
  });

  it("refuses invalid and out-of-range dates", () => {
    expect(() => formatTimestamp(new Date(Number.NaN))).toThrow(RangeError);
    expect(() => formatTimestamp(new Date("+010000-01-01T00:00:00Z"))).toThrow(RangeError);
  });

  it("truncates to whole seconds", () => {
    expect(truncateToSeconds(new Date("2026-06-04T11:55:00.999Z")).toISOString()).toBe(
      "2026-06-04T11:55:00.000Z",
    );
  });
});
