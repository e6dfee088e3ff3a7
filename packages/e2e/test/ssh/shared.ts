import { freshSharedRoot, type SharedSshd, sharedSshd } from "@distributor/storage-ssh/testing";

/** The run's shared sshd (test/setup/sshd.ts), or null when the suites must skip. */
export const sshd: SharedSshd | null = sharedSshd();

/** The shared server; only called inside suites skipped when it is missing. */
export function server(): SharedSshd {
  if (sshd === null) throw new Error("sshd is not running");
  return sshd;
}

/** A fresh, empty directory on the shared server. */
export const freshRoot = freshSharedRoot;
