export { createSshBackend } from "./backend.js";
export {
  checkHostKey,
  decideHostKey,
  type HostKeyDecision,
  type HostKeyPolicy,
  type HostKeyStatus,
} from "./known-hosts/check.js";
export {
  fingerprint,
  hashHostName,
  hostFieldMatches,
  type KnownHostEntry,
  knownHostName,
  knownHostsLine,
  parseKnownHosts,
} from "./known-hosts/parse.js";
export {
  type OpenSshLocationOptions,
  openSshLocation,
  type SshLocationConfig,
} from "./location.js";
export {
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_OPERATION_TIMEOUT_MS,
  type SshAuthentication,
  type SshBackendOptions,
} from "./options.js";
export { readPrivateKeyFile } from "./private-key.js";
