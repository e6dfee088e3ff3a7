import { isRepresentableDate, parseTimestamp as parseRfc3339 } from "@distributor/bundle";

/**
 * Timestamps in state documents are RFC 3339, written in UTC with second precision
 * (`2026-06-04T12:00:00Z`). In memory they are `Date`s truncated to the second, so a parsed value
 * and the value it serialises to are the same instant. The RFC 3339 grammar itself (upper-case
 * `T`/`Z`, offset required, no leap second) is the bundle package's, shared with manifests.
 */

/** The instant a timestamp names, truncated to the second, or why `text` is not one. */
export function parseStateTimestamp(
  text: string,
): { ok: true; date: Date } | { ok: false; problem: string } {
  const parsed = parseRfc3339(text);
  return parsed.ok ? { ok: true, date: truncateToSecond(parsed.date) } : parsed;
}

/** `2026-06-04T12:00:00Z`: UTC, second precision. The date must be serialisable. */
export function formatStateTimestamp(date: Date): string {
  if (!isSerializableTimestamp(date)) {
    throw new RangeError(`cannot format ${String(date)} as an RFC 3339 timestamp`);
  }
  return `${truncateToSecond(date).toISOString().slice(0, 19)}Z`;
}

/** The same instant without its milliseconds. */
export function truncateToSecond(date: Date): Date {
  return new Date(Math.floor(date.getTime() / 1000) * 1000);
}

/** A valid `Date` whose UTC year has the four digits RFC 3339 allows. */
export function isSerializableTimestamp(value: unknown): value is Date {
  return value instanceof Date && isRepresentableDate(value);
}
