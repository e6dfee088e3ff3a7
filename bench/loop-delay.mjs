// Preloaded with `node --import` by the benchmarks: watches the event loop's delay for the whole
// life of the process and reports, on exit, on stderr, `loop_delay_max_ms=<n>` and
// `loop_delay_p99_ms=<n>` (perf_hooks.monitorEventLoopDelay, 10 ms resolution).
import { writeSync } from "node:fs";
import { monitorEventLoopDelay } from "node:perf_hooks";

const delay = monitorEventLoopDelay({ resolution: 10 });
delay.enable();
process.on("exit", () => {
  delay.disable();
  writeSync(2, `loop_delay_max_ms=${Math.round(delay.max / 1e6)}\n`);
  writeSync(2, `loop_delay_p99_ms=${Math.round(delay.percentile(99) / 1e6)}\n`);
});
