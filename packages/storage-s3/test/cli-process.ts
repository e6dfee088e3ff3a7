import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

/** The built CLI, as the suites through the real CLI process run it. */
export const BIN = fileURLToPath(new URL("../../cli/dist/bin.cjs", import.meta.url));

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

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
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd,
      env: { ...process.env, NO_COLOR: "1", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
      stderr += chunk;
    });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}
