import type { TestProject } from "vitest/node";
import { startSharedGateway } from "../src/testing/index.js";

/** One Ceph RGW gateway for the whole run (see `startSharedGateway`). */
export default function setup(project: TestProject) {
  return startSharedGateway(project);
}
