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
export type { SshAuthentication, SshBackendOptions } from "./options.js";
export { readPrivateKeyFile } from "./private-key.js";
