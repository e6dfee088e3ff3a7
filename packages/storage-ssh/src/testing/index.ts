/** Helpers for tests that need a real OpenSSH server (`sshd` from Debian's openssh-server). */
export {
  freePort,
  generateKey,
  SshdUnavailable,
  type StartSshdOptions,
  startSshd,
  type TestSshd,
} from "./sshd.js";
