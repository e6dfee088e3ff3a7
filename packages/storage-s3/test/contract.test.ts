import { describeBackendContract } from "@distributor/storage/testing";
import { afterAll, beforeAll, describe } from "vitest";
import {
  backendOn,
  createBucket,
  emptyBucket,
  s3Server,
  uniqueName,
} from "../src/testing/index.js";

const server = s3Server();

describe.skipIf(server === undefined)("s3 on Ceph RGW", () => {
  let bucket = "";
  beforeAll(async () => {
    if (server) bucket = await createBucket(server, "contract");
  });
  afterAll(async () => {
    if (server && bucket) await emptyBucket(server, bucket, "", true);
  });

  // Each test gets its own prefix in one bucket, so the suite also proves that a backend never
  // sees or touches keys outside its prefix.
  // Versions are ETags, which derive from the content.
  describeBackendContract(
    "s3",
    () => {
      if (!server) throw new Error("no S3 server");
      const prefix = uniqueName("case");
      return {
        backend: backendOn(server, bucket, prefix),
        cleanup: () => emptyBucket(server, bucket, `${prefix}/`),
      };
    },
    { contentDerivedVersions: true },
  );
});
