import { stat } from "node:fs/promises";
import { resolve } from "node:path";
import { createLocalBackend, type StorageBackend } from "@distributor/storage";
import { WorkflowError } from "../errors.js";

/**
 * Opens a directory named on the command line as a local backend rooted there. Fails with a
 * message naming the path when it is missing or not a directory, before any backend operation.
 */
export async function openLocalDirectory(path: string): Promise<StorageBackend> {
  const root = resolve(path);
  let isDirectory: boolean;
  try {
    isDirectory = (await stat(root)).isDirectory();
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") {
      throw new WorkflowError("not_found", `${path}: no such directory`, { cause: error });
    }
    throw new WorkflowError("unreadable", `${path}: ${(error as Error).message}`, { cause: error });
  }
  if (!isDirectory) throw new WorkflowError("not_a_directory", `${path} is not a directory`);
  return createLocalBackend({ root });
}
