import type { BackendRegistry } from "@distributor/publish";

/**
 * The storage backends the CLI offers, by configuration name. Each entry imports its adapter on
 * first use so commands that never touch a backend (help, version) stay fast. A remote backend is
 * one more entry of the same shape.
 */
export const cliBackends: BackendRegistry = {
  local: async (location) => {
    const { createLocalBackend } = await import("@distributor/storage");
    return createLocalBackend({
      root: location.path,
      ...(location.fsync === undefined ? {} : { fsync: location.fsync }),
    });
  },
  s3: async (location, options) => {
    const { openS3Location } = await import("./s3-location.js");
    return openS3Location(location, options);
  },
  ssh: async (location, options) => {
    const { openSshLocation } = await import("./ssh-location.js");
    return openSshLocation(location, options);
  },
};
