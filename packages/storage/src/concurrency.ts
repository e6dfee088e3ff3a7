import { setMaxListeners } from "node:events";

/**
 * Runs `task` over `items` with at most `limit` in flight and returns the results in input order.
 * After the first failure no new task starts; the failure is rethrown once running tasks settle,
 * so no work outlives the call.
 */
export async function mapBounded<T, R>(
  items: readonly T[],
  limit: number,
  task: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  let failure: { error: unknown } | undefined;
  const worker = async (): Promise<void> => {
    while (failure === undefined && next < items.length) {
      const index = next++;
      try {
        results[index] = await task(items[index] as T, index);
      } catch (error) {
        failure ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failure !== undefined) throw failure.error;
  return results;
}

/**
 * A signal for `width` concurrent tasks that each listen to it (a read stream, a pipeline), which
 * on the caller's own signal would trip Node's warning about more than ten listeners (`width` is
 * kept for callers; the scoped signal takes any number). The scoped
 * signal follows the caller's through one listener; `dispose` detaches it when the tasks are done.
 */
export function fanOutSignal(
  signal: AbortSignal | undefined,
  _width: number,
): { signal: AbortSignal | undefined; dispose(): void } {
  if (signal === undefined) return { signal, dispose: () => undefined };
  const controller = new AbortController();
  // Each task may add several listeners (an S3 request's SDK and its read-back, a stream), all
  // removed when it ends: no bound that counts them would be anything but a guess.
  setMaxListeners(0, controller.signal);
  const follow = () => controller.abort(signal.reason);
  if (signal.aborted) follow();
  else signal.addEventListener("abort", follow, { once: true });
  return {
    signal: controller.signal,
    dispose: () => signal.removeEventListener("abort", follow),
  };
}
