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
