import {
  coverage,
  parseChunk,
  partialStoreContract,
  s3PartialStore,
} from "@distributor/server/testing";
import {
  backendOn,
  listKeys,
  type S3Server,
  s3Server,
  uniqueName,
  useBucket,
} from "@distributor/storage-s3/testing";
import { describe } from "vitest";

// Partial uploads kept in S3 staging (docs/design/upload-service.md, "Partials on S3 staging"):
// the partial store contract against a real gateway (Ceph RGW), reading what is held straight
// from a LIST of the bucket.

const server = s3Server();

const bucket = useBucket(server, "partials");

describe.skipIf(server === undefined)("partials in S3 staging", () => {
  partialStoreContract("S3 staging", async () => {
    const s3 = server as S3Server;
    const prefix = uniqueName("staging");
    const backend = backendOn(s3, bucket.name(), prefix);
    const store = s3PartialStore(backend, 60_000);
    return {
      store,
      ttlMs: 60_000,
      async heldBytes(id) {
        // The chunks of the incarnation the declaration in the bucket names.
        const incarnation = (await store.read(id))?.info.incarnation;
        const keys = await listKeys(s3, bucket.name(), `${prefix}/partial-${id}/`);
        const chunks = keys.flatMap((key) => parseChunk(key.slice(key.lastIndexOf("/") + 1)) ?? []);
        return coverage(chunks.filter((chunk) => chunk.incarnation === incarnation)).covered;
      },
      close: () => backend.close(),
    };
  });
});
