// The body of the `distributor` binary, loaded by bin.cjs once the process is set up.
import { setMaxListeners } from "node:events";
import { main } from "./main.js";

const controller = new AbortController();
// Every request in flight listens for the interrupt on this one signal, and a run keeps many in
// flight (16 writes, their SDK internals, the lease): Node's default warning at 11 listeners
// would be noise, not a leak (each listener goes with its request).
setMaxListeners(0, controller.signal);
let interrupted = false;
const onSignal = (signal: NodeJS.Signals) => {
  // The first interrupt lets the running command stop cleanly; a second one does not wait.
  if (interrupted) process.exit(130);
  interrupted = true;
  controller.abort(new DOMException(`interrupted by ${signal}`, "AbortError"));
};
process.on("SIGINT", onSignal);
process.on("SIGTERM", onSignal);
// A reader that went away (`distributor inspect … | head`) is not a failure worth a stack trace.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code === "EPIPE") process.exit(process.exitCode ?? 0);
  throw error;
});

process.exitCode = await main(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  stderrIsTTY: process.stderr.isTTY === true,
  stderrColumns: () => process.stderr.columns,
  stdoutIsTTY: process.stdout.isTTY === true,
  env: process.env,
  signal: controller.signal,
});
