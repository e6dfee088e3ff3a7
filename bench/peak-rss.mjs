// Preloaded with `node --import` by the benchmarks: reports the process's peak resident memory and
// the CPU time it used on exit, on stderr, as `peak_rss_bytes=<n>` and `cpu_ms=<user+system>`.
import { writeSync } from "node:fs";

process.on("exit", () => {
  const usage = process.resourceUsage();
  writeSync(2, `peak_rss_bytes=${usage.maxRSS * 1024}\n`);
  writeSync(2, `cpu_ms=${Math.round((usage.userCPUTime + usage.systemCPUTime) / 1000)}\n`);
});
