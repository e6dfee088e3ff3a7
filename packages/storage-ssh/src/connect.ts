import type { Socket } from "node:net";
import { StorageError } from "@distributor/storage";
import type { Client, ConnectConfig } from "ssh2";
import SftpClient from "ssh2-sftp-client";
import { BACKEND_NAME } from "./errors.js";
import { checkHostKey, decideHostKey, recordedKeyTypes } from "./known-hosts/check.js";
import { appendKnownHost, readKnownHosts } from "./known-hosts/file.js";
import { knownHostsLine } from "./known-hosts/parse.js";
import {
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_OPERATION_TIMEOUT_MS,
  describeLocation,
  type SshAuthentication,
  type SshBackendOptions,
} from "./options.js";
import { formatDuration, Session } from "./session.js";
import { connectSocket } from "./socket.js";

const DEFAULT_MAX_REQUESTS = 64;
const DEFAULT_CHANNELS = 4;

/** Host key algorithms ssh2 can use for each key type a `known_hosts` line records. */
const ALGORITHMS_BY_KEY_TYPE: Record<string, string[]> = {
  "ssh-ed25519": ["ssh-ed25519"],
  "ecdsa-sha2-nistp256": ["ecdsa-sha2-nistp256"],
  "ecdsa-sha2-nistp384": ["ecdsa-sha2-nistp384"],
  "ecdsa-sha2-nistp521": ["ecdsa-sha2-nistp521"],
  "ssh-rsa": ["rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"],
};

export function describeServer(options: SshBackendOptions): string {
  return `${options.user}@${options.host}:${options.port ?? 22}`;
}

/**
 * Opens the one SSH connection and SFTP session a backend uses. The server's host key is checked
 * against `known_hosts` before authentication; an unknown key accepted under `accept_new` is
 * recorded only once the session is up, and never in a dry run. Failures are `StorageError`s of
 * the `open backend` operation: `permission` for host key and authentication refusals,
 * `unavailable` for everything that may pass (refused connection, timeout). The whole open, up
 * to the SFTP session answering, has `connectTimeoutMs`; ssh2's own `readyTimeout` (the same
 * value) covers only the stages up to authentication.
 */
export async function openSession(options: SshBackendOptions): Promise<Session> {
  const port = options.port ?? 22;
  const connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
  const policy = options.hostKeyPolicy ?? "strict";
  const location = describeLocation(options);
  const fail = (kind: "permission" | "unavailable", detail: string, cause?: unknown) =>
    new StorageError({
      kind,
      operation: "open backend",
      backend: BACKEND_NAME,
      path: "",
      location,
      detail,
      cause,
    });

  let entries: Awaited<ReturnType<typeof readKnownHosts>>;
  try {
    entries = await readKnownHosts(options.knownHostsFile);
  } catch (error) {
    throw fail(
      "permission",
      `cannot read known_hosts file ${options.knownHostsFile}: ${(error as Error).message}`,
      error,
    );
  }
  const auth = await authenticationConfig(options.authentication, fail);

  let refusal: string | undefined;
  let toRecord: Buffer | undefined;
  const preferred = recordedKeyTypes(entries, options.host, port).flatMap(
    (type) => ALGORITHMS_BY_KEY_TYPE[type] ?? [],
  );
  const config: ConnectConfig = {
    host: options.host,
    port,
    username: options.user,
    ...auth,
    readyTimeout: connectTimeoutMs,
    keepaliveInterval: 15_000,
    keepaliveCountMax: 3,
    hostVerifier: (key: Buffer) => {
      const decision = decideHostKey(checkHostKey(entries, options.host, port, key), policy, {
        host: options.host,
        port,
        key,
        knownHostsFile: options.knownHostsFile,
      });
      if (decision.action === "refuse") {
        refusal = decision.reason;
        return false;
      }
      if (decision.action === "record") toRecord = Buffer.from(key);
      return true;
    },
    ...(preferred.length > 0 ? { algorithms: { serverHostKey: { prepend: preferred } } } : {}),
  } as ConnectConfig;

  // The wrapper's global listeners would print to the console; the session reports instead.
  const ignore = () => undefined;
  const client = new SftpClient("distributor", { error: ignore, end: ignore, close: ignore });
  let sftp: Awaited<ReturnType<SftpClient["connect"]>>;
  options.signal?.throwIfAborted();
  let socket: Socket | undefined;
  // Closing the socket ends a connect at once, whatever stage it is at (TCP, key exchange, auth).
  const abort = () => {
    socket?.destroy();
    client.end().catch(() => undefined);
  };
  options.signal?.addEventListener("abort", abort, { once: true });
  // Which stage the deadline cut short: ssh2 reports "ready" once authenticated.
  let authenticated = false;
  let timedOut: string | undefined;
  (client as unknown as { client: Client }).client.once("ready", () => {
    authenticated = true;
  });
  const deadline = setTimeout(() => {
    timedOut = authenticated
      ? "the SFTP session did not start"
      : "no SSH handshake and authentication";
    abort();
  }, connectTimeoutMs);
  try {
    // Inside the try: a port Node refuses throws here, and is reported like any failed connect.
    socket = connectSocket(options.host, port);
    sftp = await client.connect({ ...config, sock: socket });
  } catch (error) {
    await client.end().catch(() => undefined);
    // ssh2 may refuse before it takes the socket (a key it cannot parse): it must not stay open.
    socket?.destroy();
    options.signal?.throwIfAborted();
    if (refusal !== undefined) throw fail("permission", refusal, error);
    if (timedOut !== undefined) {
      throw fail("unavailable", timeoutDetail(timedOut, connectTimeoutMs), error);
    }
    throw connectError(error, fail, connectTimeoutMs);
  } finally {
    clearTimeout(deadline);
    options.signal?.removeEventListener("abort", abort);
  }
  if (options.signal?.aborted) {
    // Cancelled as the handshake completed: no session for a caller that gave up. The socket
    // closes at once (end() first, so it sees the close).
    const ended = client.end().catch(() => undefined);
    socket.destroy();
    await ended;
    options.signal.throwIfAborted();
  }
  const session = new Session(client, [sftp], {
    label: describeServer(options),
    maxRequests: options.maxRequests ?? DEFAULT_MAX_REQUESTS,
    timeoutMs: options.operationTimeoutMs ?? DEFAULT_OPERATION_TIMEOUT_MS,
    socket,
  });
  // More channels open in the background: the first request need not wait for them, and a
  // server that allows fewer sessions simply leaves us with fewer.
  openExtraChannels(client, session, (options.channels ?? DEFAULT_CHANNELS) - 1);
  if (toRecord !== undefined && !options.dryRun) {
    try {
      await appendKnownHost(options.knownHostsFile, knownHostsLine(options.host, port, toRecord));
    } catch (error) {
      await session.close();
      throw fail(
        "permission",
        `cannot record the host key in ${options.knownHostsFile}: ${(error as Error).message}`,
        error,
      );
    }
  }
  return session;
}

/** Opens more SFTP channels on the connection (each is its own sftp-server on the host). */
function openExtraChannels(client: SftpClient, session: Session, count: number): void {
  const ssh = (client as unknown as { client: Client }).client;
  for (let index = 0; index < count; index++) {
    try {
      ssh.sftp((error, channel) => {
        if (error === undefined || error === null) session.addChannel(channel);
      });
    } catch {
      return;
    }
  }
}

type Fail = (kind: "permission" | "unavailable", detail: string, cause?: unknown) => Error;

async function authenticationConfig(
  authentication: SshAuthentication,
  fail: Fail,
): Promise<Partial<ConnectConfig>> {
  switch (authentication.method) {
    case "private_key":
      return {
        privateKey: authentication.privateKey,
        ...(authentication.passphrase === undefined
          ? {}
          : { passphrase: authentication.passphrase }),
      };
    case "password":
      return { password: authentication.password };
    case "agent": {
      const socket = authentication.socket ?? process.env.SSH_AUTH_SOCK;
      if (socket === undefined || socket === "") {
        throw fail(
          "permission",
          "no authentication configured: set private_key_file, private_key_env or password_env, or run an SSH agent (SSH_AUTH_SOCK is not set)",
        );
      }
      return { agent: socket };
    }
  }
}

function timeoutDetail(stage: string, timeoutMs: number): string {
  return `timed out: ${stage} within ${formatDuration(timeoutMs)} (timeouts.connect)`;
}

function connectError(error: unknown, fail: Fail, timeoutMs: number): Error {
  const message = error instanceof Error ? error.message : String(error);
  const level = (error as { level?: unknown }).level;
  if (level === "client-authentication" || /authentication methods failed/i.test(message)) {
    return fail("permission", `authentication failed: ${message}`, error);
  }
  if (/privateKey|passphrase|Cannot parse/i.test(message)) {
    return fail("permission", `the private key cannot be used: ${message}`, error);
  }
  if (level === "client-timeout" || /Timed out/i.test(message)) {
    const detail = timeoutDetail("no SSH handshake and authentication", timeoutMs);
    return fail("unavailable", `${detail}: ${message}`, error);
  }
  return fail("unavailable", `cannot connect: ${message}`, error);
}
