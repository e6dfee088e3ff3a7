import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseSize, SIZE_UNITS } from "../../src/config/size.js";

describe("parseSize", () => {
  it.each([
    ["1B", 1],
    ["512 B", 512],
    ["1KB", 1000],
    ["1MB", 1_000_000],
    ["10GB", 10_000_000_000],
    ["2TB", 2_000_000_000_000],
    ["1KiB", 1024],
    ["64MiB", 67_108_864],
    ["1GiB", 1_073_741_824],
    ["1TiB", 1_099_511_627_776],
    ["1.5KB", 1500],
    ["1.1KB", 1100],
    ["0.5KiB", 512],
    ["007MB", 7_000_000],
    ["0B", 0],
  ])("parses %s as %d bytes", (text, bytes) => {
    expect(parseSize(text)).toBe(bytes);
  });

  it.each([
    ["", 'invalid size ""'],
    ["1048576", 'invalid size "1048576"'],
    ["10 ", 'invalid size "10 "'],
    ["10  MB", 'invalid size "10  MB"'],
    ["-1MB", 'invalid size "-1MB"'],
    ["1e3B", 'invalid size "1e3B"'],
    ["1,000B", 'invalid size "1,000B"'],
    [".5MB", 'invalid size ".5MB"'],
    ["MB", 'invalid size "MB"'],
    ["20XB", 'unknown unit "XB" in size "20XB"'],
    ["10kb", 'unknown unit "kb" in size "10kb"'],
    ["10Mb", 'unknown unit "Mb" in size "10Mb"'],
    ["10mib", 'unknown unit "mib" in size "10mib"'],
    ["1.5B", 'size "1.5B" is not a whole number of bytes'],
    ["1.0001KB", 'size "1.0001KB" is not a whole number of bytes'],
    ["9008TB", 'size "9008TB" is too large'],
  ])("rejects %j", (text, message) => {
    expect(() => parseSize(text)).toThrow(new RangeError(message));
  });

  it("multiplies whole amounts by the unit", () => {
    const scales: Record<string, number> = { B: 1, KB: 1e3, MB: 1e6, GB: 1e9, TB: 1e12 };
    for (const [index, unit] of ["KiB", "MiB", "GiB", "TiB"].entries())
      scales[unit] = 1024 ** (index + 1);
    expect(Object.keys(scales).sort()).toEqual([...SIZE_UNITS].sort());
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 1000 }),
        fc.constantFrom(...SIZE_UNITS),
        (amount, unit) => {
          expect(parseSize(`${amount}${unit}`)).toBe(amount * (scales[unit] ?? Number.NaN));
        },
      ),
    );
  });
});
