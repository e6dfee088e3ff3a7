import { readFileSync } from "node:fs";
import type { StorageBackend } from "@distributor/storage";
import { createSshBackend } from "../src/index.js";
import type { SshBackendOptions } from "../src/options.js";
import { freshSharedRoot, type SharedSshd, sharedSshd } from "../src/testing/index.js";

export const sshd: SharedSshd | null = sharedSshd();

/** The shared server; only called inside suites skipped when it is missing. */
export function server(): SharedSshd {
  if (sshd === null) throw new Error("sshd is not running");
  return sshd;
}

/** Options for a backend on the shared server, with the client key and a trusting known_hosts. */
export function backendOptions(root: string, overrides: Partial<SshBackendOptions> = {}) {
  const shared = server();
  return {
    host: shared.host,
    port: shared.port,
    user: shared.user,
    root,
    authentication: { method: "private_key", privateKey: readFileSync(shared.clientKeyFile) },
    knownHostsFile: shared.knownHostsFile,
    ...overrides,
  } satisfies SshBackendOptions;
}

/** A fresh, empty directory on the server (the server runs on this machine). */
export const freshRoot = freshSharedRoot;

export async function freshBackend(
  overrides: Partial<SshBackendOptions> = {},
): Promise<{ backend: StorageBackend; root: string }> {
  const root = await freshRoot();
  return { backend: await createSshBackend(backendOptions(root, overrides)), root };
}
