import { constants } from "node:buffer";
import {
  DEFAULT_LISTING_LIMIT,
  isStorageError,
  type StorageBackend,
  type StorageEntry,
  StorageError,
} from "@distributor/storage";

// How much of a destination the engine reads or writes at most, and the settings that say so.

/** The setting a limit comes from, named in the messages of what it refuses. */
export interface LimitSetting {
  /** The setting as its users write it: `destinations[].max_state_size`. */
  key: string;
  /** Whose setting it is: `destination "site" in pipeline "p"`. */
  owner: string;
}

/** One bound (bytes or entries), and the setting that raises it when there is one. */
export interface DestinationLimit {
  value: number;
  /** Absent for a library caller's own bound: messages then give the value alone. */
  setting?: LimitSetting | undefined;
}

/** Every bound on one destination, passed down to each read, write and listing of it. */
export interface DestinationLimits {
  /** Largest state file written or read back, in bytes. */
  stateBytes: DestinationLimit;
  /** Most entries one listing of the destination may return. */
  entries: DestinationLimit;
}

/** State files larger than this are refused (read or written) unless a caller sets its own bound. */
export const MAX_STATE_BYTES = 64 * 1024 * 1024;

/**
 * The largest state file that can be read back at all: it is decoded as one string, and no string
 * is longer than this (about 512 MiB on 64-bit Node.js). A larger bound is not a bound.
 */
export const MAX_READABLE_STATE_BYTES = constants.MAX_STRING_LENGTH;

/** The bounds of a caller that sets none: 64 MiB of state, ten million entries per listing. */
export const DEFAULT_DESTINATION_LIMITS: DestinationLimits = Object.freeze({
  stateBytes: Object.freeze({ value: MAX_STATE_BYTES }),
  entries: Object.freeze({ value: DEFAULT_LISTING_LIMIT }),
});

const UNITS: readonly (readonly [string, number])[] = [
  ["TiB", 1024 ** 4],
  ["TB", 1000 ** 4],
  ["GiB", 1024 ** 3],
  ["GB", 1000 ** 3],
  ["MiB", 1024 ** 2],
  ["MB", 1000 ** 2],
  ["KiB", 1024],
  ["KB", 1000],
];

/** `67108864` as `64 MiB`: the shortest exact unit, as the configuration would write it. */
export function formatBytes(bytes: number): string {
  let shown = `${bytes} B`;
  let shortest = Number.POSITIVE_INFINITY;
  for (const [unit, scale] of UNITS) {
    const amount = bytes / scale;
    if (bytes > 0 && Number.isInteger(amount) && amount < shortest) {
      shortest = amount;
      shown = `${amount} ${unit}`;
    }
  }
  return shown;
}

/**
 * The bound on state bytes in a message: `destinations[].max_state_size (64 MiB) of destination
 * "site" in pipeline "p"`, or without a setting `the 67108864 bytes (64 MiB) a state file may have`.
 */
export function stateLimitText(limit: DestinationLimit): string {
  const shown = formatBytes(limit.value);
  return limit.setting === undefined
    ? `the ${limit.value} bytes (${shown}) a state file may have`
    : `${limit.setting.key} (${shown}) of ${limit.setting.owner}`;
}

/** A listing past its bound in a message: `more than 10 entries (destinations[].max_entries of ...)`. */
export function entriesLimitText(limit: DestinationLimit): string {
  return limit.setting === undefined
    ? `more than ${limit.value} entries`
    : `more than ${limit.value} entries (${limit.setting.key} of ${limit.setting.owner})`;
}

/**
 * Lists `prefix` (recursively or not) within `limit`; a listing with more entries fails
 * `limit_exceeded` naming the setting that bounds it.
 */
export async function walkWithin(
  backend: StorageBackend,
  prefix: string,
  limit: DestinationLimit,
  options: { recursive?: boolean | undefined; signal?: AbortSignal | undefined } = {},
): Promise<StorageEntry[]> {
  try {
    return await backend.walk(prefix, {
      recursive: options.recursive ?? false,
      limit: limit.value,
      signal: options.signal,
    });
  } catch (error) {
    throw namedListingLimit(error, limit);
  }
}

/** A listing's `limit_exceeded` restated with the setting behind `limit`; other errors as they are. */
export function namedListingLimit(error: unknown, limit: DestinationLimit): unknown {
  if (!isStorageError(error, "limit_exceeded") || limit.setting === undefined) return error;
  return new StorageError({
    kind: "limit_exceeded",
    operation: error.operation,
    backend: error.backend,
    path: error.path,
    detail: `${entriesLimitText(limit)}; raise it to list this destination`,
    cause: error,
  });
}
