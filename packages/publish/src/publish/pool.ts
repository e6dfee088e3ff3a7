/**
 * Maps `items` with at most `limit` calls in flight; results keep the input order so reports stay
 * deterministic. After a failure no new call starts, and the map rejects with the first error
 * only once every call already started has settled — so callers can clean up afterwards knowing
 * nothing is still writing.
 */
export async function mapPool<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  let firstError: { error: unknown } | undefined;
  const worker = async () => {
    while (firstError === undefined && next < items.length) {
      const index = next++;
      try {
        results[index] = await fn(items[index] as T, index);
      } catch (error) {
        firstError ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
  if (firstError !== undefined) throw firstError.error;
  return results;
}
