import { StorageError, type StorageErrorKind, type StorageOperation } from "../errors.js";

export type BackendErrorFactory = (
  kind: StorageErrorKind,
  operation: StorageOperation,
  path: string,
  detail?: string,
  cause?: unknown,
) => StorageError;

/** The `StorageError`s of one backend, so each call site names only what differs. */
export function backendErrors(backend: string): BackendErrorFactory {
  return (kind, operation, path, detail, cause) =>
    new StorageError({ kind, operation, backend, path, detail, cause });
}

/**
 * A write whose source stream failed: the caller's data broke, not the target, so the kind is
 * `unavailable` whatever the source threw (its ENOENT names the source file, not ours). A source
 * that is itself a backend's stream already names its own path and passes through unchanged.
 */
export function sourceStreamFailed(
  error: unknown,
  makeError: BackendErrorFactory,
  operation: StorageOperation,
  path: string,
): StorageError {
  if (error instanceof StorageError) return error;
  const message = error instanceof Error ? error.message : String(error);
  return makeError("unavailable", operation, path, `source stream failed: ${message}`, error);
}

/** The words every backend uses when a compare-and-swap write finds another version. */
export function versionMismatch(expected: string, current: string | undefined): string {
  return current === undefined
    ? `expected version ${expected}, but the file does not exist`
    : `expected version ${expected}, found ${current}`;
}
