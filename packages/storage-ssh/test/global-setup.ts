import type { TestProject } from "vitest/node";
import { startSharedSshd } from "../src/testing/index.js";

/** One real OpenSSH server for the whole run (see `startSharedSshd`). */
export default function setup(project: TestProject) {
  return startSharedSshd(project);
}
