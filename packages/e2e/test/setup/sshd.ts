import { startSharedSshd } from "@distributor/storage-ssh/testing";
import type { TestProject } from "vitest/node";

/** One OpenSSH server for the whole run, for the SFTP suites (see `startSharedSshd`). */
export default function setup(project: TestProject) {
  return startSharedSshd(project);
}
