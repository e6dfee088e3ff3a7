import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseDuration } from "../../src/config/duration.js";

describe("parseDuration", () => {
  it.each([
    ["500ms", 500],
    ["45s", 45_000],
    ["30m", 1_800_000],
    ["168h", 604_800_000],
    ["1h30m", 5_400_000],
    ["1.5h", 5_400_000],
    ["2h45m30.5s", 9_930_500],
    [".5s", 500],
    ["1.s", 1000],
    ["100us", 0.1],
    ["100\u00b5s", 0.1],
    ["100\u03bcs", 0.1],
    ["1500000ns", 1.5],
    ["0", 0],
    ["0s", 0],
    ["-0s", 0],
    ["-5s", -5000],
    ["+5s", 5000],
    ["1h1h", 7_200_000],
  ])("parses %s as %d ms", (text, milliseconds) => {
    expect(parseDuration(text)).toBe(milliseconds);
  });

  it.each([
    ["", 'invalid duration ""'],
    ["-", 'invalid duration "-"'],
    ["5", 'missing unit in duration "5"'],
    ["1h30", 'missing unit in duration "1h30"'],
    ["7d", 'unknown unit "d" in duration "7d"'],
    ["5S", 'unknown unit "S" in duration "5S"'],
    ["1h 30m", 'unknown unit "h " in duration "1h 30m"'],
    ["h", 'invalid duration "h"'],
    [".s", 'invalid duration ".s"'],
    ["forever", 'invalid duration "forever"'],
    ["1.5.5h", 'missing unit in duration "1.5.5h"'],
    ["3000000h", 'duration "3000000h" is too large'],
  ])("rejects %j", (text, message) => {
    expect(() => parseDuration(text)).toThrow(new RangeError(message));
  });

  it("adds up hours, minutes and seconds", () => {
    const part = fc.integer({ min: 0, max: 10_000 });
    fc.assert(
      fc.property(part, part, part, (hours, minutes, seconds) => {
        const expected = ((hours * 60 + minutes) * 60 + seconds) * 1000;
        expect(parseDuration(`${hours}h${minutes}m${seconds}s`)).toBe(expected);
      }),
    );
  });
});
