import { ConfigError } from "@distributor/storage";
import { isRecord, shown } from "@distributor/storage/adapter";
import type { Config } from "./types.js";

/**
 * Checks the shape of the configuration a workflow was given, before anything reads it. The
 * types say a `Config` from `loadConfig` or `parseConfig`; a plain-JavaScript caller may pass
 * anything, and would otherwise meet a `TypeError` from deep inside the workflow. Only the shape
 * the workflows walk is checked (an object whose `pipelines` are objects with an `id`, a `source`
 * and `destinations`): the values themselves were validated when the configuration was parsed.
 */
export function checkGivenConfig(
  options: unknown,
  workflow: string,
): asserts options is { config: Config } {
  const sourceName = `${workflow} options`;
  if (!isRecord(options)) {
    throw new ConfigError(sourceName, [`the options must be an object, not ${shown(options)}`]);
  }
  const config = options.config;
  if (config === undefined) {
    throw new ConfigError(sourceName, [
      "config is missing: pass the configuration loadConfig or parseConfig returns",
    ]);
  }
  if (!isRecord(config)) {
    throw new ConfigError(sourceName, [
      `config must be the configuration loadConfig or parseConfig returns, not ${shown(config)}`,
    ]);
  }
  const pipelines = config.pipelines;
  if (!Array.isArray(pipelines)) {
    throw new ConfigError(sourceName, [
      `config.pipelines must be an array, not ${shown(pipelines)}`,
    ]);
  }
  const issues: string[] = [];
  pipelines.forEach((pipeline: unknown, index) => {
    const key = `config.pipelines[${index}]`;
    if (!isRecord(pipeline)) {
      issues.push(`${key} must be an object, not ${shown(pipeline)}`);
      return;
    }
    if (typeof pipeline.id !== "string")
      issues.push(`${key}.id must be a string, not ${shown(pipeline.id)}`);
    if (!isRecord(pipeline.source)) {
      issues.push(`${key}.source must be an object, not ${shown(pipeline.source)}`);
    }
    if (!Array.isArray(pipeline.destinations)) {
      issues.push(`${key}.destinations must be an array, not ${shown(pipeline.destinations)}`);
    } else {
      pipeline.destinations.forEach((destination: unknown, at) => {
        if (
          !isRecord(destination) ||
          typeof destination.id !== "string" ||
          !isRecord(destination.location)
        ) {
          issues.push(`${key}.destinations[${at}] must be a destination with an id and a location`);
        }
      });
    }
  });
  if (issues.length > 0) throw new ConfigError(sourceName, issues);
}
