/** Consecutive runs of entries with the same key, in order. */
export function groups<T>(items: readonly T[], keyOf: (item: T) => string): [string, T[]][] {
  const result: [string, T[]][] = [];
  for (const item of items) {
    const key = keyOf(item);
    const last = result[result.length - 1];
    if (last !== undefined && last[0] === key) last[1].push(item);
    else result.push([key, [item]]);
  }
  return result;
}
