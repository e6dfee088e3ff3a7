import {
  blobKeyType,
  fingerprint,
  hostFieldMatches,
  type KnownHostEntry,
  knownHostName,
} from "./parse.js";

export type HostKeyPolicy = "strict" | "accept_new";

/** What `known_hosts` says about the key a server offered. */
export type HostKeyStatus =
  /** A line for this host records exactly this key. */
  | { status: "known"; entry: KnownHostEntry }
  /** No line names this host (revoked lines aside). */
  | { status: "unknown" }
  /** Lines name this host, but none records this key: a changed key, or another key type. */
  | { status: "changed"; recorded: KnownHostEntry[] }
  /** A `@revoked` line names this host (or all hosts) with exactly this key. */
  | { status: "revoked"; entry: KnownHostEntry };

/**
 * Looks the offered key up for `host`/`port`. A key recorded under another type counts as
 * changed, not unknown: a server that stops offering the recorded key must not be able to slip a
 * new one in under `accept_new` (OpenSSH asks the server for a recorded type first; so do we).
 */
export function checkHostKey(
  entries: readonly KnownHostEntry[],
  host: string,
  port: number,
  key: Buffer,
): HostKeyStatus {
  const hostName = knownHostName(host, port);
  const recorded: KnownHostEntry[] = [];
  let known: KnownHostEntry | undefined;
  for (const entry of entries) {
    if (entry.marker === "cert-authority") continue;
    if (!hostFieldMatches(entry.hosts, hostName)) continue;
    const same = entry.key.equals(key);
    if (entry.marker === "revoked") {
      if (same) return { status: "revoked", entry };
      continue;
    }
    if (same) known ??= entry;
    recorded.push(entry);
  }
  if (known !== undefined) return { status: "known", entry: known };
  return recorded.length === 0 ? { status: "unknown" } : { status: "changed", recorded };
}

/** Key types recorded for a host, in file order, so the client can ask for those first. */
export function recordedKeyTypes(
  entries: readonly KnownHostEntry[],
  host: string,
  port: number,
): string[] {
  const hostName = knownHostName(host, port);
  const types: string[] = [];
  for (const entry of entries) {
    if (entry.marker !== undefined || !hostFieldMatches(entry.hosts, hostName)) continue;
    if (!types.includes(entry.keyType)) types.push(entry.keyType);
  }
  return types;
}

/** What to do with an offered key: connect, connect and record it, or refuse with a reason. */
export type HostKeyDecision =
  | { action: "accept" }
  | { action: "record" }
  | { action: "refuse"; reason: string };

/**
 * The policy applied to a lookup. Refusals name the host, the port and the offered key's
 * fingerprint as OpenSSH prints it, so an operator can compare it with `ssh-keygen -lf`.
 */
export function decideHostKey(
  status: HostKeyStatus,
  policy: HostKeyPolicy,
  context: { host: string; port: number; key: Buffer; knownHostsFile: string },
): HostKeyDecision {
  const offered = `${blobKeyType(context.key) ?? "unknown"} key ${fingerprint(context.key)}`;
  const server = `host ${context.host} port ${context.port}`;
  switch (status.status) {
    case "known":
      return { action: "accept" };
    case "revoked":
      return {
        action: "refuse",
        reason: `${server} offered the ${offered}, which ${context.knownHostsFile} line ${status.entry.line} marks @revoked`,
      };
    case "changed": {
      const lines = status.recorded
        .map((entry) => `line ${entry.line} (${entry.keyType} ${fingerprint(entry.key)})`)
        .join(", ");
      return {
        action: "refuse",
        reason: `host key for ${server} has changed: the server offered the ${offered}, but ${context.knownHostsFile} records ${lines}; if the change is expected, remove those lines (ssh-keygen -R '${knownHostName(context.host, context.port)}' -f ${context.knownHostsFile}) and connect again`,
      };
    }
    case "unknown":
      if (policy === "accept_new") return { action: "record" };
      return {
        action: "refuse",
        reason: `host key for ${server} is not in ${context.knownHostsFile} (host_key_policy strict); the server offered the ${offered}; add it with ssh-keyscan after checking the fingerprint, or set host_key_policy: accept_new`,
      };
  }
}
