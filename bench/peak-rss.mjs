// Preloaded with `node --import` by the benchmarks: reports the process's peak resident memory on
// exit, on stderr, as `peak_rss_bytes=<n>`.
import { writeSync } from "node:fs";

process.on("exit", () => {
  writeSync(2, `peak_rss_bytes=${process.resourceUsage().maxRSS * 1024}\n`);
});
