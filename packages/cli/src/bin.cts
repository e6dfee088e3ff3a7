#!/usr/bin/env node
// Entry of the `distributor` binary. Filesystem calls (reads, writes, fsyncs) run on libuv's
// thread pool, 4 threads unless UV_THREADPOOL_SIZE says otherwise, and publishing keeps 16 writes
// in flight so that their fsyncs overlap. The pool starts on its first use, and loading an ES
// module entry already uses it, so this entry is CommonJS: it sizes the pool, then loads the rest.
process.env.UV_THREADPOOL_SIZE ??= "16";
import("./cli.js").catch((error: unknown) => {
  process.stderr.write(`distributor: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
