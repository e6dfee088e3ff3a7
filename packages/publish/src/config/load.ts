import { constants } from "node:fs";
import { open } from "node:fs/promises";
import { resolve } from "node:path";
import { shown } from "@distributor/storage/adapter";
import { applyDefaults } from "./defaults.js";
import { ConfigError } from "./errors.js";
import { checkStructure } from "./structure.js";
import type { Config } from "./types.js";
import { validateConfig } from "./validate.js";
import { parseYaml } from "./yaml.js";

// Far above any real configuration; keeps a wrong path (a log, an image) from being read whole.
const MAX_CONFIG_BYTES = 4 * 1024 * 1024;

export interface ParseConfigOptions {
  /** Environment used while loading (only `HOME`, for `~/` paths); defaults to `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** Directory relative local paths resolve against; defaults to `process.cwd()`. */
  cwd?: string;
  /** Names the text in error messages; defaults to `config`. */
  sourceName?: string;
}

export interface LoadConfigOptions {
  env?: NodeJS.ProcessEnv;
  /** Resolves `path` and relative paths inside the file; defaults to `process.cwd()`. */
  cwd?: string;
}

/**
 * Parses, validates and normalises configuration text. Every problem is collected first; then one
 * ConfigError lists them all. Secrets are not resolved (see `resolveSecret`).
 */
export function parseConfig(text: string, options: ParseConfigOptions = {}): Config {
  const sourceName = options?.sourceName ?? "config";
  // Plain-JavaScript callers can pass anything; the YAML parser would throw a TypeError.
  if (typeof text !== "string") {
    throw new ConfigError(sourceName, [
      `the configuration must be YAML text (a string), not ${shown(text)}`,
    ]);
  }
  if (options === null || typeof options !== "object") {
    throw new ConfigError(sourceName, [
      `parseConfig options must be an object or undefined, not ${shown(options)}`,
    ]);
  }
  const document = withoutExtensionKeys(parseYaml(text, sourceName));
  const { raw, issues, broken } = checkStructure(document);
  const problems = raw === undefined ? issues : [...issues, ...validateConfig(raw, broken)];
  if (raw === undefined || problems.length > 0) throw new ConfigError(sourceName, problems);
  return applyDefaults(raw, {
    sourceName,
    cwd: resolve(options.cwd ?? process.cwd()),
    env: options.env ?? process.env,
  });
}

/** Reads a configuration file (relative to `cwd`) and parses it like `parseConfig`. */
export async function loadConfig(path: string, options: LoadConfigOptions = {}): Promise<Config> {
  const cwd = resolve(options.cwd ?? process.cwd());
  const text = await readConfigFile(resolve(cwd, path), path);
  return parseConfig(text, { sourceName: path, cwd, ...(options.env ? { env: options.env } : {}) });
}

async function readConfigFile(file: string, sourceName: string): Promise<string> {
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(file, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (error) {
    throw new ConfigError(sourceName, [`cannot read the configuration file: ${reason(error)}`], {
      cause: error,
    });
  }
  try {
    const stats = await handle.stat();
    if (!stats.isFile()) {
      throw new ConfigError(sourceName, ["the configuration path is not a regular file"]);
    }
    if (stats.size > MAX_CONFIG_BYTES) {
      throw new ConfigError(sourceName, [
        `the configuration file is larger than ${MAX_CONFIG_BYTES} bytes`,
      ]);
    }
    const bytes = await handle.readFile();
    try {
      return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    } catch (error) {
      throw new ConfigError(sourceName, ["the configuration file is not valid UTF-8"], {
        cause: error,
      });
    }
  } catch (error) {
    if (error instanceof ConfigError) throw error;
    throw new ConfigError(sourceName, [`cannot read the configuration file: ${reason(error)}`], {
      cause: error,
    });
  } finally {
    await handle.close();
  }
}

function reason(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === "ENOENT") return "no such file";
  if (code === "EACCES") return "permission denied";
  if (code === "EISDIR") return "it is a directory";
  return error instanceof Error ? error.message : String(error);
}

/**
 * Top-level keys starting with `x-` are the author's own (a place for YAML anchors shared through
 * merge keys, as compose files have): dropped before validation.
 */
function withoutExtensionKeys(document: unknown): unknown {
  if (typeof document !== "object" || document === null || Array.isArray(document)) {
    return document;
  }
  return Object.fromEntries(Object.entries(document).filter(([key]) => !key.startsWith("x-")));
}
