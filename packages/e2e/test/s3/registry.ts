import type { BackendRegistry } from "@distributor/publish";
import { createS3Backend } from "@distributor/storage-s3";
import type { S3Server } from "@distributor/storage-s3/testing";

/**
 * Destinations opened as the CLI opens them — the configured endpoint, prefix and region — with
 * the gateway's credentials, for runs of `@distributor/publish` against it.
 */
export function registryOn(server: S3Server): BackendRegistry {
  return {
    s3: async (location) =>
      createS3Backend({
        bucket: location.bucket,
        prefix: location.prefix,
        region: location.region,
        forcePathStyle: location.forcePathStyle,
        ...(location.endpoint === undefined ? {} : { endpoint: location.endpoint }),
        credentials: { accessKeyId: server.accessKeyId, secretAccessKey: server.secretAccessKey },
      }),
  };
}
