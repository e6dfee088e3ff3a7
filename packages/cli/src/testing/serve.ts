import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { BIN } from "./process.js";

// `distributor serve` as a separate process, for the suites that upload to a real server: the
// CLI's own and the end-to-end ones across instances.

/** A `distributor serve` child process and what it has logged so far. */
export interface Serving {
  child: ChildProcess;
  /** Base URL from the `listening` log line. */
  url: string;
  stderr: () => string;
  exited: Promise<number | null>;
}

/**
 * Starts `distributor serve --config <config> --listen 127.0.0.1:0` and resolves once it logs the
 * address it listens on. The caller stops it (SIGTERM, or SIGKILL in a finally).
 */
export async function startServe(
  config: string,
  options: { cwd: string; env?: NodeJS.ProcessEnv; listen?: string },
): Promise<Serving> {
  const child = spawn(
    process.execPath,
    [BIN, "serve", "--config", config, "--listen", options.listen ?? "127.0.0.1:0"],
    {
      cwd: options.cwd,
      env: { ...process.env, ...options.env },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let stderr = "";
  const exited = once(child, "exit").then(([code]) => code as number | null);
  const url = await new Promise<string>((resolve, reject) => {
    child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
      stderr += chunk;
      const line = stderr.split("\n").find((l) => l.includes('"type":"listening"'));
      if (line !== undefined) resolve(JSON.parse(line).url);
    });
    void exited.then((code) => reject(new Error(`serve exited ${code}: ${stderr}`)));
  });
  return { child, url, stderr: () => stderr, exited };
}
