import type { BackendRegistry } from "@distributor/publish";

/**
 * The storage backends the CLI offers, by configuration name. Each entry imports its adapter on
 * first use so commands that never touch a backend (help, version) stay fast. A remote backend is
 * one more entry of the same shape.
 */
export const cliBackends: BackendRegistry = {
  local: async (location) => {
    const { createLocalBackend } = await import("@distributor/storage");
    return createLocalBackend({ root: location.path });
  },
  s3: async (location, options) => {
    const { createS3Backend } = await import("@distributor/storage-s3");
    // Both names or neither (config validation enforces it); neither is the SDK's default chain.
    let credentials: { accessKeyId: string; secretAccessKey: string } | undefined;
    if (location.credentials !== undefined) {
      const { resolveSecret } = await import("@distributor/publish");
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
    });
  },
};
