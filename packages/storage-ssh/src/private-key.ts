import { readFile } from "node:fs/promises";
import { ConfigError, StorageError } from "@distributor/storage";
import { BACKEND_NAME } from "./errors.js";

/**
 * Reads a private key file, naming the file (never its contents) and the location it is for
 * (`ssh:user@host:port/path`, when given) if that fails: a file that does not exist is a
 * configuration mistake (`ConfigError`), one that cannot be read is `permission`.
 */
export async function readPrivateKeyFile(file: string, location?: string): Promise<Buffer> {
  try {
    return await readFile(file);
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code === "ENOENT" || code === "ENOTDIR") {
      throw new ConfigError(location ?? "ssh location", [`privateKeyFile ${file} does not exist`], {
        cause: error,
      });
    }
    throw new StorageError({
      kind: "permission",
      operation: "open backend",
      backend: BACKEND_NAME,
      path: "",
      location,
      detail: `cannot read private key file ${file}: ${(error as Error).message}`,
      cause: error,
    });
  }
}
