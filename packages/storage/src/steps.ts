import { setImmediate as nextTurn } from "node:timers/promises";

/**
 * Long synchronous work (parsing or checking a big state or manifest, encoding a state) is
 * written as a generator that pauses (`yield`) every so often. Run to its end at once it is a
 * plain synchronous function (`runSteps`); a caller doing IO runs it in slices (`runInSlices`),
 * letting the event loop turn between them, so that timers such as a lease's renewal fire on time
 * whatever the size of the work.
 */
export type Steps<T> = Generator<void, T, void>;

/** Runs `steps` to the end without pausing. */
export function runSteps<T>(steps: Steps<T>): T {
  for (;;) {
    const next = steps.next();
    if (next.done) return next.value;
  }
}

/** Work done between two turns of the event loop. */
const SLICE_MS = 50;

/** Runs `steps`, letting the event loop turn once `SLICE_MS` went by since the last turn. */
export async function runInSlices<T>(steps: Steps<T>): Promise<T> {
  const clock = new SliceClock();
  for (;;) {
    const next = steps.next();
    if (next.done) return next.value;
    if (clock.due()) await clock.turn();
  }
}

/**
 * The same slices for a long loop in async code: `if (clock.due()) await clock.turn()` lets the
 * event loop turn once `SLICE_MS` went by since the last turn, and costs a clock read otherwise.
 */
export class SliceClock {
  #since = performance.now();

  due(): boolean {
    return performance.now() - this.#since >= SLICE_MS;
  }

  async turn(): Promise<void> {
    await nextTurn();
    this.#since = performance.now();
  }
}

/** Items sorted natively in one step by `sortSteps`, before runs are merged. */
const SORT_RUN = 8192;

/**
 * Sorts `items` in place by `compare`, stably, in steps: runs of a few thousand items are sorted
 * natively, then merged pairwise, with a pause after each run and every few thousand items merged.
 * A million paths take about a second to sort with a JavaScript comparison, too long to hold an
 * event loop (a lease's renewal, a server's other requests) for.
 */
export function* sortSteps<T>(items: T[], compare: (left: T, right: T) => number): Steps<T[]> {
  if (items.length <= SORT_RUN) return items.sort(compare);
  for (let start = 0; start < items.length; start += SORT_RUN) {
    const run = items.slice(start, start + SORT_RUN).sort(compare);
    for (let index = 0; index < run.length; index++) items[start + index] = run[index] as T;
    yield;
  }
  let from = items;
  let to: T[] = new Array(items.length);
  for (let width = SORT_RUN; width < items.length; width *= 2) {
    let merged = 0;
    for (let left = 0; left < items.length; left += 2 * width) {
      const middle = Math.min(left + width, items.length);
      const end = Math.min(left + 2 * width, items.length);
      let i = left;
      let j = middle;
      for (let k = left; k < end; k++) {
        // Stable: of equal items, the left run's first.
        if (j >= end || (i < middle && compare(from[i] as T, from[j] as T) <= 0))
          to[k] = from[i++] as T;
        else to[k] = from[j++] as T;
        if (++merged % SORT_RUN === 0) yield;
      }
    }
    [from, to] = [to, from];
  }
  if (from !== items)
    for (let index = 0; index < items.length; index++) items[index] = from[index] as T;
  return items;
}
