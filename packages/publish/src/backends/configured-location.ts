// A configured pipeline, destination or source looked up by id and opened through the registry.
import { pathProblem, type StorageBackend } from "@distributor/storage";
import type {
  Config,
  DestinationConfig,
  PipelineConfig,
  StorageLocation,
} from "../config/types.js";
import { WorkflowError } from "../errors.js";
import { type BackendRegistry, openBackend } from "./registry.js";

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
