import { constants } from "node:fs";
import { open } from "node:fs/promises";
import { join } from "node:path";

/**
 * A secret reference names both an environment variable and a file in `secrets.directory`, so it
 * must be valid as either; this also keeps a reference from escaping the directory.
 */
export const SECRET_NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_]*$/;

export function isSecretName(name: string): boolean {
  return SECRET_NAME_PATTERN.test(name);
}

// Tokens, passwords and keys are small; a larger file is a wrong path, not a secret.
const MAX_SECRET_BYTES = 64 * 1024;

export interface ResolveSecretOptions {
  /** Where environment variables are looked up; defaults to `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** `secrets.directory` of the configuration (absolute); without it only the environment is used. */
  secretsDirectory?: string | undefined;
  signal?: AbortSignal;
}

/** A secret reference could not be resolved to a non-empty value. */
export class SecretError extends Error {
  override readonly name = "SecretError";
  readonly code = "secret_unavailable";
  /** The reference (environment variable / file name) that failed. */
  readonly reference: string;

  constructor(reference: string, detail: string, options: { cause?: unknown } = {}) {
    super(`secret ${reference} ${detail}`, { cause: options.cause });
    this.reference = reference;
  }
}

/**
 * Resolves a secret reference: the environment variable `name` when it is set and not empty,
 * else the file `<secretsDirectory>/<name>` without one trailing newline. Fails with a
 * SecretError naming the reference when neither gives a non-empty value. Configuration loading
 * never calls this; the commands that need a secret do, so a missing one only stops them. It
 * lives here, beside the backends, so every remote adapter resolves its credentials the same way.
 */
export async function resolveSecret(
  name: string,
  options: ResolveSecretOptions = {},
): Promise<string> {
  if (!isSecretName(name)) {
    throw new SecretError(JSON.stringify(name), "is not a valid reference name");
  }
  const fromEnv = (options.env ?? process.env)[name];
  if (fromEnv !== undefined && fromEnv !== "") return fromEnv;

  const envState = fromEnv === undefined ? "is not set" : "is empty";
  if (options.secretsDirectory === undefined) {
    throw new SecretError(
      name,
      `is not available: environment variable ${name} ${envState} and no secrets.directory is configured`,
    );
  }
  const file = join(options.secretsDirectory, name);
  const value = await readSecretFile(name, file, envState, options.signal);
  if (value === "") throw new SecretError(name, `is empty (file ${file})`);
  return value;
}

async function readSecretFile(
  name: string,
  file: string,
  envState: string,
  signal: AbortSignal | undefined,
): Promise<string> {
  signal?.throwIfAborted();
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    // Non-blocking so that a FIFO in place of the file cannot hang the command.
    handle = await open(file, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") {
      throw new SecretError(
        name,
        `is not available: environment variable ${name} ${envState} and file ${file} does not exist`,
        { cause: error },
      );
    }
    throw new SecretError(name, `cannot be read from ${file}: ${(error as Error).message}`, {
      cause: error,
    });
  }
  try {
    const stats = await handle.stat();
    if (!stats.isFile())
      throw new SecretError(name, `cannot be read: ${file} is not a regular file`);
    if (stats.size > MAX_SECRET_BYTES) {
      throw new SecretError(
        name,
        `cannot be read: ${file} is larger than ${MAX_SECRET_BYTES} bytes`,
      );
    }
    const text = await handle.readFile({ encoding: "utf8", signal });
    return text.endsWith("\r\n")
      ? text.slice(0, -2)
      : text.endsWith("\n")
        ? text.slice(0, -1)
        : text;
  } catch (error) {
    if (error instanceof SecretError || (error as Error).name === "AbortError") throw error;
    throw new SecretError(name, `cannot be read from ${file}: ${(error as Error).message}`, {
      cause: error,
    });
  } finally {
    await handle.close();
  }
}
