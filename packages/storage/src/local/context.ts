import { join } from "node:path";
import type { StorageError, StorageOperation } from "../errors.js";
import { backendErrors } from "../internal/backend-error.js";
import { BACKEND_NAME } from "./errno.js";

/** The resolved root every native path of one local backend hangs from. */
export interface LocalRoot {
  /** Absolute, resolved once when the backend is created. */
  readonly root: string;
}

/** Native path of a logical path or prefix; validated logical paths cannot climb out of the root. */
export function nativePath(local: LocalRoot, logical: string): string {
  return logical === "" ? local.root : join(local.root, ...logical.split("/"));
}

export const localError = backendErrors(BACKEND_NAME);

/** The refusal every operation reports when it meets a symlink below the root. */
export function symlinkRefused(
  operation: StorageOperation,
  path: string,
  symlinkPath: string,
): StorageError {
  return localError(
    "unsupported",
    operation,
    path,
    `"${symlinkPath}" is a symlink; symlinks are refused`,
  );
}
