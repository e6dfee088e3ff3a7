/** Nanoseconds per unit, as Go's `time.ParseDuration` accepts them. */
const UNIT_NANOSECONDS: Readonly<Record<string, number>> = {
  ns: 1,
  us: 1e3,
  "\u00b5s": 1e3, // micro sign
  "\u03bcs": 1e3, // Greek small letter mu
  ms: 1e6,
  s: 1e9,
  m: 60e9,
  h: 3600e9,
};

// Go stores durations as int64 nanoseconds; larger values are out of range there too.
const MAX_NANOSECONDS = 2 ** 63 - 1;

const NUMBER = /^(\d*)(?:\.(\d*))?/;
const UNIT = /^[^\d.]+/;

/**
 * Parses a Go duration (`500ms`, `45s`, `1h30m`, `1.5h`, `-2m`, `0`) into milliseconds, which may
 * be fractional for sub-millisecond units. Throws a RangeError naming the problem otherwise.
 */
export function parseDuration(text: string): number {
  let rest = text;
  let sign = 1;
  if (rest.startsWith("-") || rest.startsWith("+")) {
    sign = rest.startsWith("-") ? -1 : 1;
    rest = rest.slice(1);
  }
  if (rest === "0") return 0;
  if (rest === "") throw new RangeError(`invalid duration "${text}"`);

  let nanoseconds = 0;
  while (rest !== "") {
    const number = NUMBER.exec(rest);
    const whole = number?.[1] ?? "";
    const fraction = number?.[2] ?? "";
    if (whole === "" && fraction === "") throw new RangeError(`invalid duration "${text}"`);
    rest = rest.slice(number?.[0].length ?? 0);

    const unit = UNIT.exec(rest)?.[0];
    if (unit === undefined) throw new RangeError(`missing unit in duration "${text}"`);
    const scale = UNIT_NANOSECONDS[unit];
    if (scale === undefined) throw new RangeError(`unknown unit "${unit}" in duration "${text}"`);
    rest = rest.slice(unit.length);

    nanoseconds += Number(`${whole || "0"}.${fraction || "0"}`) * scale;
    if (nanoseconds > MAX_NANOSECONDS) throw new RangeError(`duration "${text}" is too large`);
  }
  // Whole nanoseconds, like Go; the division keeps sub-millisecond precision.
  const milliseconds = (sign * Math.round(nanoseconds)) / 1e6;
  return milliseconds === 0 ? 0 : milliseconds; // no -0 for "-0s"
}
