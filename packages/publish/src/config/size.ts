/** Bytes per unit: decimal units are powers of 1000, binary units powers of 1024. */
const UNIT_BYTES: Readonly<Record<string, number>> = {
  B: 1,
  KB: 1000,
  MB: 1000 ** 2,
  GB: 1000 ** 3,
  TB: 1000 ** 4,
  KiB: 1024,
  MiB: 1024 ** 2,
  GiB: 1024 ** 3,
  TiB: 1024 ** 4,
};

/** The unit names a size may use, in the order the docs list them. */
export const SIZE_UNITS: readonly string[] = Object.keys(UNIT_BYTES);

const SIZE = /^(\d+(?:\.\d+)?) ?([A-Za-z]+)$/;

/**
 * Parses a size such as `64MiB`, `10GB`, `512 B` or `1.5KB` into bytes. A unit is required
 * (a bare number is ambiguous), units are case-sensitive, a decimal number must come to a whole
 * number of bytes, and the result must be a safe integer. Zero parses; callers that need a
 * positive size check it. Throws a RangeError naming the problem otherwise.
 */
export function parseSize(text: string): number {
  const match = SIZE.exec(text);
  if (match === null) throw new RangeError(`invalid size "${text}"`);
  const [, amount = "", unit = ""] = match;
  const scale = UNIT_BYTES[unit];
  if (scale === undefined) throw new RangeError(`unknown unit "${unit}" in size "${text}"`);
  const bytes = sizeInBytes(amount, scale);
  if (bytes === undefined) throw new RangeError(`size "${text}" is not a whole number of bytes`);
  if (bytes > BigInt(Number.MAX_SAFE_INTEGER)) throw new RangeError(`size "${text}" is too large`);
  return Number(bytes);
}

/** Exact decimal arithmetic (`1.1KB` is 1100, not 1100.0000000000002); undefined when fractional. */
function sizeInBytes(amount: string, scale: number): bigint | undefined {
  const [whole = "0", fraction = ""] = amount.split(".");
  const scaled = BigInt(whole + fraction) * BigInt(scale);
  const divisor = 10n ** BigInt(fraction.length);
  return scaled % divisor === 0n ? scaled / divisor : undefined;
}
