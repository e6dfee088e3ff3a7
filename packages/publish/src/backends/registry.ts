import { createLocalBackend, type StorageBackend, StorageError } from "@distributor/storage";
import type { Backend, SecretsConfig, StorageLocation } from "../config/types.js";

/** What a backend factory is told besides the location it opens. */
export interface OpenBackendOptions {
  /** Whether the backend is read from (a source) or published to (a destination). */
  role: "source" | "destination";
  /** A dry run must not write anything, not even an SSH `known_hosts` entry. */
  dryRun?: boolean;
  /** Where secret references resolve from files (besides the environment). */
  secrets?: SecretsConfig;
  signal?: AbortSignal;
}

/** Opens the storage backend a configured location describes. */
export type BackendFactory<Location extends StorageLocation = StorageLocation> = (
  location: Location,
  options: OpenBackendOptions,
) => Promise<StorageBackend>;

/**
 * Storage backends by configuration name (`local`, `s3`, `ssh`). Core packages never import a
 * remote adapter: the caller passes the factories it wants, and `local` is always available.
 */
export type BackendRegistry = {
  readonly [Name in Backend]?: BackendFactory<Extract<StorageLocation, { backend: Name }>>;
};

/** The registry used when a caller passes none: the local filesystem only. */
export const defaultBackends: BackendRegistry = {
  local: async (location) =>
    createLocalBackend({
      root: location.path,
      ...(location.fsync === undefined ? {} : { fsync: location.fsync }),
    }),
};

/** Opens `location` with the caller's factory for its backend, or the default one. */
export async function openBackend(
  registry: BackendRegistry | undefined,
  location: StorageLocation,
  options: OpenBackendOptions,
): Promise<StorageBackend> {
  const registries = registry === undefined ? [defaultBackends] : [registry, defaultBackends];
  for (const candidate of registries) {
    const factory = candidate[location.backend] as BackendFactory | undefined;
    if (factory !== undefined) return factory(location, options);
  }
  const available = [...new Set(registries.flatMap((candidate) => Object.keys(candidate)))].sort();
  throw new StorageError({
    kind: "unsupported",
    operation: "open backend",
    backend: location.backend,
    path: describeLocation(location),
    detail: `no ${location.backend} backend is registered (available: ${available.join(", ")})`,
  });
}

/** A configured location as operators wrote it: the directory, `user@host:port/path`, or `bucket/prefix`. */
export function describeLocation(location: StorageLocation): string {
  switch (location.backend) {
    case "local":
      return location.path;
    case "ssh":
      return `${location.user}@${location.host}:${location.port}/${location.path.replace(/^\//, "")}`;
    case "s3":
      return location.prefix === "" ? location.bucket : `${location.bucket}/${location.prefix}`;
  }
}

/** Runs `work` with an open backend and closes it afterwards, whatever happened. */
export async function withBackend<Result>(
  backend: StorageBackend,
  work: (backend: StorageBackend) => Promise<Result>,
): Promise<Result> {
  try {
    return await work(backend);
  } finally {
    // A close failure must not hide the outcome of the work itself.
    await backend.close().catch(() => undefined);
  }
}
