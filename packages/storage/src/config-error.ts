/** Options of a ConfigError. */
export interface ConfigErrorOptions {
  cause?: unknown;
}

/**
 * Configuration that cannot be used: a file that cannot be read, is not valid YAML or breaks a
 * rule of the schema, or options given to a factory (`openS3Location`, `openSshLocation`, a
 * workflow's `config`) that are missing or malformed. `issues` holds every problem found, each
 * starting with the key it concerns (`pipelines[0].destinations[1].reconciliation.mode must be
 * replace or merge`, `bucket is missing`); the message names the source and lists them all. It
 * lives here, below every package that validates configuration, so that each throws the same
 * class and callers test for one code, `config_invalid`.
 */
export class ConfigError extends Error {
  override readonly name = "ConfigError";
  readonly code = "config_invalid";
  /** Where the configuration came from: its file, the name given to `parseConfig`, a factory. */
  readonly sourceName: string;
  readonly issues: readonly string[];

  constructor(sourceName: string, issues: readonly string[], options: ConfigErrorOptions = {}) {
    super(summarise(sourceName, issues), { cause: options.cause });
    this.sourceName = sourceName;
    this.issues = issues;
  }
}

/** Whether `error` is a ConfigError, recognised by name so that it holds across package copies. */
export function isConfigError(error: unknown): error is ConfigError {
  return error instanceof Error && error.name === "ConfigError";
}

function summarise(sourceName: string, issues: readonly string[]): string {
  if (issues.length === 0) return `${sourceName}: invalid configuration`;
  if (issues.length === 1) return `${sourceName}: ${issues[0]}`;
  // One problem per line keeps every message greppable on its own.
  const lines = issues.map((issue) => `\n  - ${issue}`).join("");
  return `${sourceName}: ${issues.length} configuration problems:${lines}`;
}
