import { type OpenBackendOptions, resolveSecret, type S3Location } from "@distributor/publish";
import type { StorageBackend } from "@distributor/storage";
import { createS3Backend } from "@distributor/storage-s3";

/**
 * Opens a configured `s3` location. Credentials come from the two secret references it names
 * (environment, then `secrets.directory`) — both or neither, as configuration validation
 * enforces; neither leaves the SDK's default chain (instance roles, profiles) in charge.
 */
export async function openS3Location(
  location: S3Location,
  options: OpenBackendOptions,
): Promise<StorageBackend> {
  let credentials: { accessKeyId: string; secretAccessKey: string } | undefined;
  if (location.credentials !== undefined) {
    const lookup = { secretsDirectory: options.secrets?.directory, signal: options.signal };
    credentials = {
      accessKeyId: await resolveSecret(location.credentials.accessKeyIdEnv, lookup),
      secretAccessKey: await resolveSecret(location.credentials.secretAccessKeyEnv, lookup),
    };
  }
  return createS3Backend({
    bucket: location.bucket,
    prefix: location.prefix,
    region: location.region,
    forcePathStyle: location.forcePathStyle,
    ...(location.endpoint === undefined ? {} : { endpoint: location.endpoint }),
    ...(credentials === undefined ? {} : { credentials }),
    ...(location.timeouts?.connectMs === undefined
      ? {}
      : { connectTimeoutMs: location.timeouts.connectMs }),
    ...(location.timeouts?.requestMs === undefined
      ? {}
      : { requestTimeoutMs: location.timeouts.requestMs }),
  });
}
