/** One step into the YAML document: a mapping key or a list index. */
export type KeySegment = string | number;

const PLAIN_KEY = /^[A-Za-z0-9_-]+$/;

/**
 * Formats a key path the way messages show it: `pipelines[0].destinations[1].state.mode`.
 * Keys that are not plain words are quoted so that the path stays unambiguous.
 */
export function formatKeyPath(segments: readonly KeySegment[]): string {
  let text = "";
  for (const segment of segments) {
    if (typeof segment === "number") text += `[${segment}]`;
    else if (!PLAIN_KEY.test(segment)) text += `[${JSON.stringify(segment)}]`;
    else text += text === "" ? segment : `.${segment}`;
  }
  return text;
}

/** True when `path` is `ancestor` or lies below it (both as formatted by `formatKeyPath`). */
export function isAtOrBelow(path: string, ancestor: string): boolean {
  if (ancestor === "") return true;
  if (!path.startsWith(ancestor)) return false;
  const next = path.charAt(ancestor.length);
  return next === "" || next === "." || next === "[";
}
