import { type OpenBackendOptions, resolveSecret, type SshLocation } from "@distributor/publish";
import type { StorageBackend } from "@distributor/storage";
import {
  createSshBackend,
  readPrivateKeyFile,
  type SshAuthentication,
} from "@distributor/storage-ssh";

/**
 * Opens a configured `ssh` location: resolves its secret references (environment, then
 * `secrets.directory`), picks the authentication the configuration names (private key file,
 * private key secret with optional passphrase, password secret, else the SSH agent) and passes
 * the dry-run promise on, so a dry run never writes `known_hosts`.
 */
export async function openSshLocation(
  location: SshLocation,
  options: OpenBackendOptions,
): Promise<StorageBackend> {
  const secret = (name: string) =>
    resolveSecret(name, { secretsDirectory: options.secrets?.directory, signal: options.signal });
  let authentication: SshAuthentication;
  if (location.privateKeyFile !== undefined || location.privateKeyEnv !== undefined) {
    const privateKey =
      location.privateKeyFile !== undefined
        ? await readPrivateKeyFile(location.privateKeyFile)
        : await secret(location.privateKeyEnv as string);
    authentication = {
      method: "private_key",
      privateKey,
      ...(location.passphraseEnv === undefined
        ? {}
        : { passphrase: await secret(location.passphraseEnv) }),
    };
  } else if (location.passwordEnv !== undefined) {
    authentication = { method: "password", password: await secret(location.passwordEnv) };
  } else {
    authentication = { method: "agent" };
  }
  return createSshBackend({
    host: location.host,
    port: location.port,
    user: location.user,
    root: location.path,
    authentication,
    knownHostsFile: location.knownHostsFile,
    hostKeyPolicy: location.hostKeyPolicy,
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
