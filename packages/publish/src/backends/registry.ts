import {
  createLocalBackend,
  pathProblem,
  type StorageBackend,
  StorageError,
} from "@distributor/storage";
import type {
  Backend,
  Config,
  DestinationConfig,
  PipelineConfig,
  SecretsConfig,
  StorageLocation,
} from "../config/types.js";

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

/** Options every workflow accepts (docs/consumers/library.md). */
export interface WorkflowOptions<Event = never> {
  /** Backend factories by name, added to (and overriding) the default `local`. */
  backends?: BackendRegistry;
  signal?: AbortSignal;
  /** Progress events, for displays; workflows never depend on what the listener does. */
  onEvent?: (event: Event) => void;
  /** Clock, for reproducible reports and tests. */
  now?: () => Date;
}

/**
 * A workflow failure that is neither a storage nor a bundle nor a config problem, e.g. an unknown
 * pipeline id. `code` is the snake_case `error.code` of the CLI's JSON envelope.
 */
export class WorkflowError extends Error {
  override readonly name = "WorkflowError";
  readonly code: string;

  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

export function findPipeline(config: Config, pipelineId: string): PipelineConfig {
  const pipeline = config.pipelines.find((candidate) => candidate.id === pipelineId);
  if (pipeline === undefined) {
    throw new WorkflowError(
      "pipeline_not_found",
      `pipeline ${JSON.stringify(pipelineId)} not found`,
    );
  }
  return pipeline;
}

export function findDestination(
  pipeline: PipelineConfig,
  destinationId: string,
): DestinationConfig {
  const destination = pipeline.destinations.find((candidate) => candidate.id === destinationId);
  if (destination === undefined) {
    throw new WorkflowError(
      "destination_not_found",
      `pipeline ${pipeline.id} destination ${destinationId} not found`,
    );
  }
  return destination;
}

/** The stored location of a pipeline's source; `http_upload` sources hold nothing to read. */
export function sourceLocation(pipeline: PipelineConfig): StorageLocation {
  const source = pipeline.source;
  if (source.backend === "http_upload") {
    throw new WorkflowError(
      "unsupported_source",
      `pipeline ${pipeline.id} source backend http_upload stores no bundles; uploads are validated by serve`,
    );
  }
  return source;
}

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

/** What selects and opens a configured pipeline's source or one of its destinations. */
export interface ConfiguredLocationOptions {
  config: Config;
  pipelineId: string;
  backends?: BackendRegistry;
  signal?: AbortSignal;
}

/**
 * Opens the source of a configured pipeline for reading. `bundlePath` is checked first, so a bad
 * path fails before any connection is made.
 */
export async function openConfiguredSource(
  options: ConfiguredLocationOptions & { bundlePath?: string },
): Promise<{ pipeline: PipelineConfig; prefix: string | undefined; backend: StorageBackend }> {
  const pipeline = findPipeline(options.config, options.pipelineId);
  const location = sourceLocation(pipeline);
  const prefix = options.bundlePath === undefined ? undefined : bundlePrefix(options.bundlePath);
  const backend = await openBackend(options.backends, location, {
    role: "source",
    dryRun: true,
    secrets: options.config.secrets,
    signal: options.signal,
  });
  return { pipeline, prefix, backend };
}

/** Opens one configured destination; `dryRun` promises the backend that nothing is written. */
export async function openConfiguredDestination(
  options: ConfiguredLocationOptions & { destinationId: string },
  dryRun: boolean,
): Promise<{ pipeline: PipelineConfig; destination: DestinationConfig; backend: StorageBackend }> {
  const pipeline = findPipeline(options.config, options.pipelineId);
  const destination = findDestination(pipeline, options.destinationId);
  const backend = await openBackend(options.backends, destination.location, {
    role: "destination",
    dryRun,
    secrets: options.config.secrets,
    signal: options.signal,
  });
  return { pipeline, destination, backend };
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

/**
 * A bundle path typed by a person (`--bundle`) as a logical prefix: `.` and `""` are the root, a
 * trailing `/` is tolerated; anything else must be a valid logical path (docs/design/bundles.md).
 */
export function bundlePrefix(text: string): string {
  const trimmed = text.length > 1 && text.endsWith("/") ? text.slice(0, -1) : text;
  if (trimmed === "" || trimmed === ".") return "";
  const problem = pathProblem(trimmed);
  if (problem !== undefined) {
    throw new WorkflowError(
      "invalid_bundle_path",
      `bundle path ${JSON.stringify(text)} is not a path relative to the source root: ${problem}`,
    );
  }
  return trimmed;
}
