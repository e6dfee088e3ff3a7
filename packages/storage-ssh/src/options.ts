import type { HostKeyPolicy } from "./known-hosts/check.js";

/** Default of `SshBackendOptions.connectTimeoutMs`. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
/** Default of `SshBackendOptions.operationTimeoutMs`. */
export const DEFAULT_OPERATION_TIMEOUT_MS = 30_000;

/** How the backend authenticates; secrets are values here, resolved by the caller. */
export type SshAuthentication =
  | { method: "private_key"; privateKey: string | Buffer; passphrase?: string }
  | { method: "password"; password: string }
  /** The SSH agent listening on `socket` (default `SSH_AUTH_SOCK`). */
  | { method: "agent"; socket?: string };

export interface SshBackendOptions {
  host: string;
  /** Default 22. */
  port?: number;
  user: string;
  /**
   * Root directory on the server every logical path is confined to; a relative path is relative
   * to the login directory.
   */
  root: string;
  authentication: SshAuthentication;
  /** Absolute path of the OpenSSH `known_hosts` file checked (and, for `accept_new`, updated). */
  knownHostsFile: string;
  /** Default `strict`. */
  hostKeyPolicy?: HostKeyPolicy;
  /** Never write `known_hosts` (a dry run): an unknown key is accepted for this session only. */
  dryRun?: boolean;
  /**
   * Time allowed for opening the backend: TCP connect, key exchange, authentication and the
   * start of the SFTP session (default `DEFAULT_CONNECT_TIMEOUT_MS`, 10 s). Past it the open
   * fails with `unavailable` and the socket is closed.
   */
  connectTimeoutMs?: number;
  /**
   * Time one SFTP request may go unanswered (default `DEFAULT_OPERATION_TIMEOUT_MS`, 30 s). Past
   * it the operation fails with `unavailable` ("timed out"), the connection is closed at once, and
   * every later call fails the same way instead of waiting.
   */
  operationTimeoutMs?: number;
  /** SFTP requests outstanding at once over the one connection (default 64). */
  maxRequests?: number;
  /**
   * SFTP channels opened on the one connection (default 4). OpenSSH serves each channel's
   * requests one at a time, so several let files transfer (and fsync) side by side.
   */
  channels?: number;
  /**
   * Flush every written file (`fsync@openssh.com`) before moving it into place (default true).
   * With false, only writes marked `commit` (the state, the lease) are flushed.
   */
  fsync?: boolean;
  /** Cancels the connect (not the backend's later operations, which take their own signals). */
  signal?: AbortSignal;
}

/** The backend's root as a path on the server: `.` for the login directory, no trailing slash. */
export function normaliseRoot(root: string): string {
  if (root === "" || root === ".") return ".";
  const trimmed = root.replace(/\/+$/, "");
  return trimmed === "" ? "/" : trimmed;
}

/** The whole location, as errors and `backend.location` name it: `ssh:user@host:port/path`. */
export function describeLocation(
  options: Pick<SshBackendOptions, "user" | "host" | "port" | "root">,
): string {
  const root = normaliseRoot(options.root);
  return `ssh:${options.user}@${options.host}:${options.port ?? 22}${root.startsWith("/") ? "" : "/"}${root}`;
}
