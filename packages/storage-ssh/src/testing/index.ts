// Entry of `@distributor/storage-ssh/testing`: helpers for tests that need a real OpenSSH server
// (`sshd` from Debian's openssh-server): one started per test or file (`startSshd`), or one per run
// started by a vitest global setup (`startSharedSshd`) and shared with the suites (`sharedSshd`).

export {
  freshSharedRoot,
  type SharedSshd,
  sharedSshd,
  sshdRequired,
  startSharedSshd,
} from "./shared-sshd.js";
export {
  freePort,
  generateKey,
  SshdUnavailable,
  type StartSshdOptions,
  startSshd,
  type TestSshd,
} from "./sshd.js";
