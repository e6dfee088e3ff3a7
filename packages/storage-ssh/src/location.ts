import { homedir } from "node:os";
import { join } from "node:path";
import { ConfigError, resolveSecret, type StorageBackend } from "@distributor/storage";
import { isRecord, OptionChecks, shown } from "@distributor/storage/adapter";
import { createSshBackend } from "./backend.js";
import type { HostKeyPolicy } from "./known-hosts/check.js";
import { describeLocation, type SshAuthentication } from "./options.js";
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
 * run never writes `known_hosts`. The location is checked first: a missing or malformed key, or
 * a private key file that does not exist, fails with one `ConfigError` naming the key, before
 * any connection is made.
 */
export async function openSshLocation(
  location: SshLocationConfig,
  options: OpenSshLocationOptions = {},
): Promise<StorageBackend> {
  checkSshLocation(location);
  const where = describeLocation({ ...location, root: location.path });
  const secret = (name: string) =>
    resolveSecret(name, {
      secretsDirectory: options.secrets?.directory,
      ...(options.env === undefined ? {} : { env: options.env }),
      ...(options.signal === undefined ? {} : { signal: options.signal }),
    });
  let authentication: SshAuthentication;
  if (location.privateKeyFile !== undefined) {
    authentication = await privateKeyAuthentication(
      await readPrivateKeyFile(location.privateKeyFile, where),
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

const HOST_KEY_POLICIES: readonly HostKeyPolicy[] = ["strict", "accept_new"];

/** Throws one `ConfigError` naming every missing or malformed key of `location`. */
function checkSshLocation(location: unknown): asserts location is SshLocationConfig {
  if (!isRecord(location)) {
    throw new ConfigError("ssh location", [
      `the location must be an object, not ${shown(location)}`,
    ]);
  }
  const checks = new OptionChecks(location);
  checks.oneOf("backend", ["ssh"]);
  const host = checks.text("host", true);
  if (host !== undefined && /[\s@/]/.test(host)) {
    checks.problem("host", `must be a host name or address, not ${shown(host)}`);
  }
  checks.integer("port", 1, 65_535);
  const user = checks.text("user", true);
  if (user !== undefined && /[\s@]/.test(user)) {
    checks.problem("user", `must be a user name, not ${shown(user)}`);
  }
  checks.string("path", true);
  checks.text("privateKeyFile", false);
  checks.secretName("privateKeyEnv", false);
  checks.secretName("passphraseEnv", false);
  checks.secretName("passwordEnv", false);
  checks.text("knownHostsFile", false);
  checks.oneOf("hostKeyPolicy", HOST_KEY_POLICIES);
  checks.boolean("fsync");
  const timeouts = checks.nested("timeouts");
  timeouts?.integer("connectMs", 1);
  timeouts?.integer("requestMs", 1);
  if (checks.issues.length > 0) throw new ConfigError("ssh location", checks.issues);
}
