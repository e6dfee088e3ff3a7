/**
 * RFC 3339 timestamps as manifests carry them: `2026-06-04T11:55:00Z` or `…+02:00`, optional
 * fraction. The offset is required (a bare local time is ambiguous). Like Go's `time.RFC3339`
 * (the reference implementation), `T` and `Z` must be upper case and a leap second (`:60`) is
 * refused. JavaScript dates hold milliseconds, so fraction digits beyond the third are truncated.
 */
const RFC3339 =
  /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:Z|([+-])(\d{2}):(\d{2}))$/;

export type TimestampParse = { ok: true; date: Date } | { ok: false; problem: string };

/** Parses an RFC 3339 timestamp with an offset, explaining what is wrong when it is not one. */
export function parseTimestamp(text: string): TimestampParse {
  const match = RFC3339.exec(text);
  if (match === null) {
    return { ok: false, problem: "not in the form YYYY-MM-DDThh:mm:ss[.fraction](Z|±hh:mm)" };
  }
  const [, year, month, day, hour, minute, second, fraction, sign, offsetHour, offsetMinute] =
    match.map((part) => part ?? "");
  const y = Number(year);
  const mo = Number(month);
  const d = Number(day);
  if (mo < 1 || mo > 12) return { ok: false, problem: `month ${month} is out of range` };
  const days = daysInMonth(y, mo);
  if (d < 1 || d > days) {
    return { ok: false, problem: `day ${day} is out of range for ${year}-${month}` };
  }
  if (Number(hour) > 23) return { ok: false, problem: `hour ${hour} is out of range` };
  if (Number(minute) > 59) return { ok: false, problem: `minute ${minute} is out of range` };
  if (Number(second) > 59) return { ok: false, problem: `second ${second} is out of range` };
  let offsetMinutes = 0;
  if (sign !== "") {
    if (Number(offsetHour) > 23 || Number(offsetMinute) > 59) {
      return { ok: false, problem: `offset ${sign}${offsetHour}:${offsetMinute} is out of range` };
    }
    offsetMinutes = (Number(offsetHour) * 60 + Number(offsetMinute)) * (sign === "-" ? -1 : 1);
  }
  const millis = Number((fraction ?? "").slice(0, 3).padEnd(3, "0"));
  const date = new Date(0);
  // setUTCFullYear keeps years 0000–0099 literal; Date.UTC would map them to 1900–1999.
  date.setUTCFullYear(y, mo - 1, d);
  date.setUTCHours(Number(hour), Number(minute), Number(second), millis);
  const utc = new Date(date.getTime() - offsetMinutes * 60_000);
  if (!isRepresentableDate(utc))
    return { ok: false, problem: "falls outside the years 0000–9999 in UTC" };
  return { ok: true, date: utc };
}

/**
 * Formats a date as RFC 3339 in UTC: second precision (`2026-06-04T11:55:00Z`) when the
 * milliseconds are zero, else with exactly three fraction digits (`…:00.250Z`), so no precision
 * a `Date` holds is lost.
 */
export function formatTimestamp(date: Date): string {
  if (!isRepresentableDate(date)) {
    throw new RangeError(`cannot format ${String(date)} as an RFC 3339 timestamp`);
  }
  const iso = date.toISOString();
  return date.getUTCMilliseconds() === 0 ? `${iso.slice(0, 19)}Z` : iso;
}

/** Truncates a date to whole seconds (the default precision of new manifests). */
export function truncateToSeconds(date: Date): Date {
  return new Date(Math.floor(date.getTime() / 1000) * 1000);
}

/** True for valid dates in years 0000–9999, the range RFC 3339 can write. */
export function isRepresentableDate(date: Date): boolean {
  const time = date.getTime();
  if (Number.isNaN(time)) return false;
  const year = date.getUTCFullYear();
  return year >= 0 && year <= 9999;
}

function daysInMonth(year: number, month: number): number {
  if (month === 2) {
    const leap = (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
    return leap ? 29 : 28;
  }
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}
