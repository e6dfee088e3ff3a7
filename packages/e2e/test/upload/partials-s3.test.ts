import {
  coverage,
  parseChunk,
  partialStoreContract,
  s3PartialStore,
} from "@distributor/server/testing";
import {
  backendOn,
  createBucket,
  emptyBucket,
  listKeys,
  type S3Server,
  s3Server,
  uniqueName,
} from "@distributor/storage-s3/testing";
import { afterAll, beforeAll, describe } from "vitest";

// Partial uploads kept in S3 staging (docs/design/upload-service.md, "Partials on S3 staging"):
// the partial store contract against a real gateway (Ceph RGW), reading what is held straight
// from a LIST of the bucket.

const server = s3Server();
let bucket = "";

beforeAll(async () => {
  if (server !== undefined) bucket = await createBucket(server, "partials");
});
afterAll(async () => {
  if (server !== undefined && bucket !== "") await emptyBucket(server, bucket, "", true);
});

describe.skipIf(server === undefined)("partials in S3 staging", () => {
  partialStoreContract("S3 staging", async () => {
    const s3 = server as S3Server;
    const prefix = uniqueName("staging");
    const backend = backendOn(s3, bucket, prefix);
    const store = s3PartialStore(backend, 60_000);
    return {
      store,
      ttlMs: 60_000,
      async heldBytes(id) {
        // The chunks of the incarnation the declaration in the bucket names.
        const incarnation = (await store.read(id))?.info.incarnation;
        const keys = await listKeys(s3, bucket, `${prefix}/partial-${id}/`);
        const chunks = keys.flatMap((key) => parseChunk(key.slice(key.lastIndexOf("/") + 1)) ?? []);
        return coverage(chunks.filter((chunk) => chunk.incarnation === incarnation)).covered;
      },
      close: () => backend.close(),
    };
  });
});
