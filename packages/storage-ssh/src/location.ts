import { homedir } from "node:os";
import { join } from "node:path";
import { resolveSecret, type StorageBackend } from "@distributor/storage";
import { createSshBackend } from "./backend.js";
import type { HostKeyPolicy } from "./known-hosts/check.js";
import type { SshAuthentication } from "./options.js";
import { readPrivateKeyFile } from "./private-key.js";

/**
 * An `ssh` location as `@distributor/publish` parses it from configuration (its `SshLocation`),
 * declared here by shape so this package does not depend on the publish package. Secrets are
 * references (an environment variable, else a file in `secrets.directory`), never values.
 */
export interface SshLocationConfig {
  backend?: "ssh";
  host: string;
  /** Default 22. */
  port?: number;
  user: string;
  /** Root directory on the server (a relative path is relative to the login directory). */
  path: string;
  /** Absolute path of a private key file on this machine. */
  privateKeyFile?: string;
  /** Secret reference holding a private key. */
  privateKeyEnv?: string;
  /** Secret reference holding the private key's passphrase. */
  passphraseEnv?: string;
  /** Secret reference holding a password. */
  passwordEnv?: string;
  /** Absolute path of the known_hosts file; default `~/.ssh/known_hosts`. */
  knownHostsFile?: string;
  /** Default `strict`. */
  hostKeyPolicy?: HostKeyPolicy;
  /** Flush every written file before moving it into place (default true). */
  fsync?: boolean;
  timeouts?: { connectMs?: number; requestMs?: number };
}

/** What opening a configured location needs besides the location (publish's `OpenBackendOptions` fits). */
export interface OpenSshLocationOptions {
  /** A dry run never writes `known_hosts`. */
  dryRun?: boolean;
  /** `secrets.directory` of the configuration: where references resolve when not in the environment. */
  secrets?: { directory?: string };
  /** Where secret references are looked up first; default `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** Cancels the connect. */
  signal?: AbortSignal;
}

/**
 * Opens the backend of a configured `ssh` location: resolves its secret references, picks the
 * authentication the location names (private key file, private key secret with optional
 * passphrase, password secret, else the SSH agent) and passes the dry-run promise on, so a dry
 * run never writes `known_hosts`.
 */
export async function openSshLocation(
  location: SshLocationConfig,
  options: OpenSshLocationOptions = {},
): Promise<StorageBackend> {
  const secret = (name: string) =>
    resolveSecret(name, {
      secretsDirectory: options.secrets?.directory,
      ...(options.env === undefined ? {} : { env: options.env }),
      ...(options.signal === undefined ? {} : { signal: options.signal }),
    });
  let authentication: SshAuthentication;
  if (location.privateKeyFile !== undefined) {
    authentication = await privateKeyAuthentication(
      await readPrivateKeyFile(location.privateKeyFile),
      location.passphraseEnv,
      secret,
    );
  } else if (location.privateKeyEnv !== undefined) {
    authentication = await privateKeyAuthentication(
      await secret(location.privateKeyEnv),
      location.passphraseEnv,
      secret,
    );
  } else if (location.passwordEnv !== undefined) {
    authentication = { method: "password", password: await secret(location.passwordEnv) };
  } else {
    authentication = { method: "agent" };
  }
  return createSshBackend({
    host: location.host,
    ...(location.port === undefined ? {} : { port: location.port }),
    user: location.user,
    root: location.path,
    authentication,
    knownHostsFile: location.knownHostsFile ?? join(homedir(), ".ssh", "known_hosts"),
    ...(location.hostKeyPolicy === undefined ? {} : { hostKeyPolicy: location.hostKeyPolicy }),
    dryRun: options.dryRun ?? false,
    ...(location.fsync === undefined ? {} : { fsync: location.fsync }),
    ...(location.timeouts?.connectMs === undefined
      ? {}
      : { connectTimeoutMs: location.timeouts.connectMs }),
    ...(location.timeouts?.requestMs === undefined
      ? {}
      : { operationTimeoutMs: location.timeouts.requestMs }),
    ...(options.signal === undefined ? {} : { signal: options.signal }),
  });
}

async function privateKeyAuthentication(
  privateKey: string | Buffer,
  passphraseEnv: string | undefined,
  secret: (name: string) => Promise<string>,
): Promise<SshAuthentication> {
  return {
    method: "private_key",
    privateKey,
    ...(passphraseEnv === undefined ? {} : { passphrase: await secret(passphraseEnv) }),
  };
}
