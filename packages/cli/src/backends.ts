import type { BackendRegistry } from "@distributor/publish";

/**
 * The storage backends the CLI offers, by configuration name: `local`, and `s3` and `ssh` from
 * publish's `remoteBackends()` (the registry library users get). Every entry imports its code on
 * first use, so commands that never open a backend (help, version) load neither the workflows
 * nor an adapter.
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
    const { remoteBackends } = await import("@distributor/publish");
    return remoteBackends().s3!(location, options);
  },
  ssh: async (location, options) => {
    const { remoteBackends } = await import("@distributor/publish");
    return remoteBackends().ssh!(location, options);
  },
};
