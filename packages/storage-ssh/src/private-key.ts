import { readFile } from "node:fs/promises";
import { sshError } from "./errors.js";

/** Reads a private key file, naming the file (never its contents) when that fails. */
export async function readPrivateKeyFile(file: string): Promise<Buffer> {
  try {
    return await readFile(file);
  } catch (error) {
    throw sshError(
      "permission",
      "open backend",
      "",
      `cannot read private key file ${file}: ${(error as Error).message}`,
      error,
    );
  }
}
