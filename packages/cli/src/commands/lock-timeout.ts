import { UsageError } from "../errors.js";

/**
 * `--lock-timeout` in milliseconds, or undefined when the flag was not given. A value that is not
 * a non-negative Go duration is a usage error (exit 2).
 */
export function lockTimeoutMs(
  parseDuration: (text: string) => number,
  value: string | undefined,
): number | undefined {
  if (value === undefined) return undefined;
  let ms: number;
  try {
    ms = parseDuration(value);
  } catch (error) {
    throw new UsageError(`--lock-timeout ${JSON.stringify(value)}: ${(error as Error).message}`);
  }
  if (ms < 0) throw new UsageError(`--lock-timeout ${JSON.stringify(value)} must not be negative`);
  return ms;
}
