// Flags several commands declare alike, and the checks they share.
import { UsageError } from "../errors.js";
import { OUTPUT_FORMATS, optionalString, type RawFlags, requiredString } from "../flags.js";
import type { FlagSpec } from "./spec.js";

/** `--config` of `run`, `audit` and `serve` when the flag is omitted. */
export const DEFAULT_CONFIG_PATH = "./distributor.yml";

export const formatFlag: FlagSpec = {
  type: "string",
  describe: "Output format: text (default) or json",
  choices: OUTPUT_FORMATS,
};

/** `--config` of the commands that read ./distributor.yml without it. */
export const defaultConfigFlag: FlagSpec = {
  type: "string",
  describe: `Configuration file (default ${DEFAULT_CONFIG_PATH})`,
};

export const requiredConfigFlag: FlagSpec = {
  type: "string",
  describe: "Configuration file (required)",
};

export const lockTimeoutFlag: FlagSpec = {
  type: "string",
  describe:
    "Wait this long (Go duration: 500ms, 30s, 2m) for another run's lease on a state file before failing (default 0s)",
};

/** `--quiet` of the commands that draw a run's progress and summary line. */
export const runQuietFlag: FlagSpec = {
  type: "boolean",
  describe: "Draw no progress and no summary line on stderr (drawn only when stderr is a terminal)",
};

export const allowDeletesFlag: FlagSpec = {
  type: "string",
  describe:
    "Let a publication delete up to this many managed outputs whatever the destination's max_deletes allows",
};

export const signFlag: FlagSpec = {
  type: "string",
  describe:
    "Sign the manifest with this SSH key into manifest.json.sig (ssh-keygen -Y sign -f: a private key, or the .pub of a key an ssh-agent holds)",
};

export const signatureNamespaceFlag: FlagSpec = {
  type: "string",
  describe: "SSHSIG namespace of --sign (default: distributor)",
};

/** `--allow-deletes <n>` when given: a whole number of outputs. */
export function allowDeletes(flags: RawFlags): { allowDeletes?: number } {
  const value = optionalString(flags, "allow-deletes");
  if (value === undefined) return {};
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(Number(value))) {
    throw new UsageError(
      `--allow-deletes must be a whole number of outputs (such as 250), got ${JSON.stringify(value)}`,
    );
  }
  return { allowDeletes: Number(value) };
}

/** `--lock-timeout` when given; parsed by the handler, which has the duration parser loaded. */
export function lockTimeout(flags: RawFlags): { lockTimeout?: string } {
  const value = optionalString(flags, "lock-timeout");
  return value === undefined ? {} : { lockTimeout: value };
}

/** `--sign` and `--signature-namespace`, which only means something beside `--sign`. */
export function signingOptions(
  flags: RawFlags,
  command: string,
): { sign?: string; signatureNamespace?: string } {
  const sign = optionalString(flags, "sign");
  const signatureNamespace = optionalString(flags, "signature-namespace");
  if (signatureNamespace !== undefined && sign === undefined) {
    throw new UsageError(`${command} --signature-namespace needs --sign <key-file>`);
  }
  return {
    ...(sign === undefined ? {} : { sign }),
    ...(signatureNamespace === undefined ? {} : { signatureNamespace }),
  };
}

/** The `[path]` positional, or undefined when it was not given. */
/** `--max-files <n>`: a whole number greater than zero, or absent. */
export function maxFilesFlag(flags: RawFlags, command: string): number | undefined {
  const value = optionalString(flags, "max-files");
  if (value === undefined) return undefined;
  if (!/^[1-9]\d*$/.test(value) || !Number.isSafeInteger(Number(value))) {
    throw new UsageError(
      `${command} --max-files must be a whole number of files greater than zero (such as 200000), got ${JSON.stringify(value)}`,
    );
  }
  return Number(value);
}

export function positionalPath(flags: RawFlags): string | undefined {
  const path = flags.path;
  if (path === undefined) return undefined;
  if (typeof path !== "string" || path === "") throw new UsageError("path must not be empty");
  return path;
}

/** The two forms of `validate` and `inspect`: a local path, or a configured pipeline's source. */
export function sourceSelection(
  flags: RawFlags,
  name: string,
):
  | { kind: "path"; path: string }
  | { kind: "config"; configPath: string; pipelineId: string; bundlePath?: string } {
  const path = positionalPath(flags);
  const configPath = optionalString(flags, "config");
  const wantsConfig =
    configPath !== undefined ||
    flags.pipeline !== undefined ||
    flags.bundle !== undefined ||
    flags.destination !== undefined;
  if (path !== undefined && wantsConfig) {
    throw new UsageError(`${name} accepts a path or --config, not both`);
  }
  if (!wantsConfig) {
    if (path === undefined) throw new UsageError(`${name} requires a path or --config`);
    return { kind: "path", path };
  }
  if (configPath === undefined) throw new UsageError(`${name} requires --config`);
  const pipelineId = requiredString(flags, "pipeline", name);
  const bundlePath = optionalString(flags, "bundle");
  return bundlePath === undefined
    ? { kind: "config", configPath, pipelineId }
    : { kind: "config", configPath, pipelineId, bundlePath };
}
