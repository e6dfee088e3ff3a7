import { startSharedGateway } from "@distributor/storage-s3/testing";
import type { TestProject } from "vitest/node";

/** One Ceph RGW gateway for the whole run, for the S3 suites (see `startSharedGateway`). */
export default function setup(project: TestProject) {
  return startSharedGateway(project);
}
