import { setImmediate as nextTurn } from "node:timers/promises";
import type { Steps } from "@distributor/state";

// Long synchronous work (a big state parsed, encoded or compared) run in slices, the event loop
// turning between them, so that timers such as a lease's renewal fire on time.

/** Work done between two turns of the event loop. */
const SLICE_MS = 50;

/** Runs `steps`, letting the event loop turn once `SLICE_MS` went by since the last turn. */
export async function runInSlices<T>(steps: Steps<T>): Promise<T> {
  let since = performance.now();
  for (;;) {
    const next = steps.next();
    if (next.done) return next.value;
    if (performance.now() - since >= SLICE_MS) {
      await nextTurn();
      since = performance.now();
    }
  }
}
