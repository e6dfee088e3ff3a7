/**
 * Long parses and validations are written as generators that pause (`yield`) between their
 * phases and every `STEP_RECORDS` records. Run to the end at once, they are the plain synchronous
 * functions; a caller doing IO may run them in slices and let its event loop turn between slices,
 * so a big state never holds it for long (the package itself stays synchronous and pure).
 */
export type Steps<T> = Generator<void, T, void>;

/** Records handled between two pauses of a step generator. */
export const STEP_RECORDS = 1000;

/** Runs `steps` to the end without pausing. */
export function runSteps<T>(steps: Steps<T>): T {
  for (;;) {
    const next = steps.next();
    if (next.done) return next.value;
  }
}
