/** A field of a text summary line; absent values print as `-`. */
export type FieldValue = string | number | boolean | null | undefined;

/**
 * One summary line of `key=value` fields, optionally after a label: `Bundle: path=. id=r files=2`.
 * Values that would break the line apart (spaces, quotes, `=`) are JSON-quoted so the line stays
 * machine-splittable.
 */
export function summaryLine(
  label: string | undefined,
  fields: ReadonlyArray<readonly [string, FieldValue]>,
): string {
  const body = fields.map(([key, value]) => `${key}=${formatValue(value)}`).join(" ");
  return label === undefined ? body : `${label}: ${body}`;
}

export function formatValue(value: FieldValue): string {
  if (value === undefined || value === null) return "-";
  if (typeof value !== "string") return String(value);
  return /^[^\s"=\\]+$/u.test(value) ? value : JSON.stringify(value);
}
