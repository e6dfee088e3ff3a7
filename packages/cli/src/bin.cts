#!/usr/bin/env node
// Entry of the `distributor` binary. It sizes libuv's thread pool (where fsyncs run) to two threads
// per core, between 4 and 16, before anything uses the pool — loading an ES module entry already
// does, so this entry is CommonJS and imports the rest afterwards. Why these numbers:
// docs/decisions.md, "The CLI starts from a CommonJS entry".
import nodeModule = require("node:module");
import os = require("node:os");

// Node 22.1 and later keep compiled module code on disk between runs (the temp directory, or
// NODE_COMPILE_CACHE; NODE_DISABLE_COMPILE_CACHE=1 turns it off). Node 20 has none.
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
