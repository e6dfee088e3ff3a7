import { UsageError } from "./errors.js";

// Settings read from the environment that exist for the end-to-end suites, not for operators,
// gathered here so that none hides in a handler.

/**
 * For tests only, not an operator setting: the lifetime of the leases this run takes, in
 * milliseconds (renewed every third of it). The end-to-end suites shorten it to stop a real
 * process past its lease in seconds rather than a minute; unset, the library's default applies.
 */
const LEASE_TTL_ENV = "DISTRIBUTOR_LEASE_TTL_MS";

export function leaseTtlMs(env: Readonly<Record<string, string | undefined>> | undefined) {
  const text = env?.[LEASE_TTL_ENV];
  if (text === undefined || text === "") return undefined;
  const ms = Number(text);
  if (!/^[0-9]+$/.test(text) || !Number.isSafeInteger(ms) || ms <= 0) {
    throw new UsageError(
      `${LEASE_TTL_ENV} must be a positive whole number of milliseconds, got ${JSON.stringify(text)}`,
    );
  }
  return ms;
}
