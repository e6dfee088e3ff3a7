import { mkdtemp, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { inject } from "vitest";
import type { TestProject } from "vitest/node";
import { startSshd } from "./sshd.js";

/** What the suites learn about the shared server; `null` when it could not start here. */
export interface SharedSshd {
  host: string;
  port: number;
  user: string;
  sftpRoot: string;
  clientKeyFile: string;
  hostKeyFile: string;
  /** A known_hosts file that trusts the server. */
  knownHostsFile: string;
  knownHostsLine: string;
  /** Milliseconds from spawning sshd to its listening. */
  startMs: number;
}

declare module "vitest" {
  interface ProvidedContext {
    sshd: SharedSshd | null;
  }
}

/** True under CI, where a missing sshd must fail the suite instead of skipping it. */
export function sshdRequired(): boolean {
  const ci = process.env.CI;
  return ci !== undefined && ci !== "" && ci !== "0" && ci !== "false";
}

/**
 * A vitest global setup's work: starts one real OpenSSH server on loopback for the whole run,
 * provides it to the suites as `sshd` (see `sharedSshd`) and returns what stops it. Tests that kill
 * or restart a server start their own with `startSshd`.
 */
export async function startSharedSshd(project: TestProject): Promise<() => Promise<void>> {
  const started = Date.now();
  let sshd: Awaited<ReturnType<typeof startSshd>>;
  try {
    sshd = await startSshd();
  } catch (error) {
    if (sshdRequired()) {
      throw new Error(`the SSH suite needs sshd under CI: ${(error as Error).message}`, {
        cause: error,
      });
    }
    console.warn(`SSH backend tests skipped: ${(error as Error).message}`);
    project.provide("sshd", null);
    return async () => undefined;
  }
  const knownHostsFile = join(sshd.directory, "known_hosts");
  await writeFile(knownHostsFile, sshd.knownHostsLine);
  project.provide("sshd", {
    host: sshd.host,
    port: sshd.port,
    user: sshd.user,
    sftpRoot: sshd.sftpRoot,
    clientKeyFile: sshd.clientKeyFile,
    hostKeyFile: sshd.hostKeyFile,
    knownHostsFile,
    knownHostsLine: sshd.knownHostsLine,
    startMs: Date.now() - started,
  });
  return () => sshd.stop();
}

/** The server `startSharedSshd` provided to this run, or null when it could not start here. */
export function sharedSshd(): SharedSshd | null {
  return inject("sshd");
}

/** A fresh, empty directory on the shared server (it runs on this machine); throws without one. */
export function freshSharedRoot(): Promise<string> {
  const shared = sharedSshd();
  if (shared === null) throw new Error("sshd is not running");
  return mkdtemp(join(shared.sftpRoot, "t-"));
}
