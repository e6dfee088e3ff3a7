import type { BackendRegistry } from "@distributor/publish";

/**
 * The storage backends the CLI offers, by configuration name: `local`, and `s3` and `ssh` from
 * publish's `remoteBackends()` (the registry library users get). Every entry imports its code on
 * first use, so commands that never open a backend (help, version) load neither the workflows
 * nor an adapter. `onOpen` hears the name of each backend opened (for the Node line notice).
 * `blockingCalls: false` puts local destinations' system calls on the thread pool, for `serve`,
 * which must keep answering requests while many publications run.
 */
export function createCliBackends(
  onOpen: (backend: string) => void = () => {},
  options: { blockingCalls?: boolean } = {},
): BackendRegistry {
  return {
    local: async (location) => {
      const { createLocalBackend } = await import("@distributor/storage");
      onOpen("local");
      return createLocalBackend({
        root: location.path,
        ...(location.fsync === undefined ? {} : { fsync: location.fsync }),
        ...(options.blockingCalls === undefined ? {} : { blockingCalls: options.blockingCalls }),
      });
    },
    s3: async (location, options) => {
      const { remoteBackends } = await import("@distributor/publish");
      onOpen("s3");
      return remoteBackends().s3!(location, options);
    },
    ssh: async (location, options) => {
      const { remoteBackends } = await import("@distributor/publish");
      onOpen("ssh");
      return remoteBackends().ssh!(location, options);
    },
  };
}
