export interface ConfigErrorOptions {
  cause?: unknown;
}

/**
 * A configuration file that cannot be read, is not valid YAML, or breaks a rule of the schema.
 * `issues` holds every problem found, each starting with the key path it concerns
 * (`pipelines[0].destinations[1].reconciliation.mode must be replace or merge`); the message names
 * the file and lists them all.
 */
export class ConfigError extends Error {
  override readonly name = "ConfigError";
  /** The file the configuration came from (or the name given to `parseConfig`). */
  readonly sourceName: string;
  readonly issues: readonly string[];

  constructor(sourceName: string, issues: readonly string[], options: ConfigErrorOptions = {}) {
    super(summarise(sourceName, issues), { cause: options.cause });
    this.sourceName = sourceName;
    this.issues = issues;
  }
}

export function isConfigError(error: unknown): error is ConfigError {
  return error instanceof ConfigError;
}

function summarise(sourceName: string, issues: readonly string[]): string {
  if (issues.length === 0) return `${sourceName}: invalid configuration`;
  if (issues.length === 1) return `${sourceName}: ${issues[0]}`;
  // One problem per line keeps every message greppable on its own.
  const lines = issues.map((issue) => `\n  - ${issue}`).join("");
  return `${sourceName}: ${issues.length} configuration problems:${lines}`;
}
