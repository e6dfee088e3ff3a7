#!/usr/bin/env node
// Entry of the `distributor` binary. A local publish keeps 16 writes in flight so that their
// fsyncs, which run on libuv's thread pool, overlap; the pool has 4 threads unless
// UV_THREADPOOL_SIZE says otherwise. More threads than cores slow down everything else the run
// does (measured: 16 threads on 2 cores made a 20 000-file publish twice as slow), so the pool
// gets two threads per core, between 4 and 16. The pool starts on first use, and loading an ES
// module entry already uses it, so this entry is CommonJS: it sizes the pool, then loads the rest.
import nodeModule = require("node:module");
import os = require("node:os");

// Node 22.1 and later keep compiled module code on disk between runs (in the temp directory, or
// NODE_COMPILE_CACHE): measured on Node 22, `--help` 142 → 127 ms, a local skip-only run no
// different. Node 20 has no such cache. A cache that cannot be written is skipped by Node
// itself; NODE_DISABLE_COMPILE_CACHE=1 turns it off.
(nodeModule as { enableCompileCache?: () => unknown }).enableCompileCache?.();

process.env.UV_THREADPOOL_SIZE ??= String(Math.min(16, Math.max(4, 2 * os.availableParallelism())));
// The AWS SDK prints an eight-line NodeVersionSupportWarning on Node 20 whenever an S3 client is
// made; the CLI says the same in one line of its own (src/node-line.ts). Set before the SDK
// loads; an operator's own setting wins.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";
import("./cli.js").catch((error: unknown) => {
  process.stderr.write(`distributor: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
