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

/** The `code` a native error carries (an errno name, an SFTP status number), if of that type. */
export function nativeCode(error: unknown, type: "string"): string | undefined;
export function nativeCode(error: unknown, type: "number"): number | undefined;
export function nativeCode(error: unknown, type: "string" | "number"): string | number | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === type ? (code as string | number) : undefined;
}

/** A failure's own words. */
export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * A driver's mapping of its native failures to `StorageError`s: a `StorageError` passes through
 * unchanged, anything else gets the kind and detail `describe` reads from it, and keeps it as
 * the cause.
 */
export function nativeErrorMapper(
  backend: string,
  describe: (error: unknown) => { kind: StorageErrorKind; detail: string },
): (error: unknown, operation: StorageOperation, path: string) => StorageError {
  return (error, operation, path) => {
    if (error instanceof StorageError) return error;
    const { kind, detail } = describe(error);
    return new StorageError({ kind, operation, backend, path, detail, cause: error });
  };
}

/** True when a native error carries one of `codes` (errno names, SFTP status numbers). */
export function hasNativeCode(error: unknown, ...codes: readonly (string | number)[]): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return (typeof code === "string" || typeof code === "number") && codes.includes(code);
}
