import { type CliResult, runCli } from "@distributor/cli/testing";

/**
 * Runs `distributor args…` in `cwd`, with `env` added to this process's environment (the
 * credentials reach the CLI only through the variables the config names), asynchronously: the
 * gateway answers from another process, but a test server in this one would deadlock with a
 * synchronous spawn.
 */
export function runCliIn(
  cwd: string,
  env: Readonly<Record<string, string>>,
  args: readonly string[],
): Promise<CliResult> {
  return runCli(args, { cwd, env });
}
