/** The kinds of storage failure every backend reports, independent of the underlying SDK. */
export type StorageErrorKind =
  | "not_found"
  | "already_exists"
  | "not_empty"
  | "invalid_path"
  | "permission"
  | "unsupported"
  | "unavailable"
  | "limit_exceeded"
  | "conflict";

/** Operation names used in error messages; operators grep for them. */
export type StorageOperation =
  | "validate path"
  | "read file"
  | "open reader"
  | "write file"
  | "write stream"
  | "stat"
  | "walk"
  | "has any"
  // `deletePaths` reports this name, which error messages have always shown.
  | "delete managed outputs"
  | "delete prefix"
  | "abort uploads"
  | "read link"
  | "switch link"
  | "hard link"
  | "clone file"
  | "register backend"
  | "open backend"
  | "close";

export interface StorageErrorOptions {
  kind: StorageErrorKind;
  operation: StorageOperation;
  backend: string;
  path: string;
  detail?: string;
  cause?: unknown;
  /**
   * The backend's whole location (`ssh:deploy@host:22/srv/reports`, `s3://bucket/prefix`), for a
   * failure that concerns no path inside it, such as opening it: the message names it instead of
   * `<backend>:.`.
   */
  location?: string | undefined;
}

export class StorageError extends Error {
  override readonly name = "StorageError";
  readonly kind: StorageErrorKind;
  readonly operation: StorageOperation;
  readonly backend: string;
  readonly path: string;

  constructor(options: StorageErrorOptions) {
    const shown = options.path === "" ? "." : options.path;
    const detail = options.detail ?? defaultDetail(options.kind);
    const where = options.location ?? `${options.backend}:${shown}`;
    super(`${options.operation} ${where}: ${detail}`, { cause: options.cause });
    this.kind = options.kind;
    this.operation = options.operation;
    this.backend = options.backend;
    this.path = options.path;
  }
}

export function isStorageError(error: unknown, kind?: StorageErrorKind): error is StorageError {
  return error instanceof StorageError && (kind === undefined || error.kind === kind);
}

/** Words used when an error has no specific detail. */
export function defaultDetail(kind: StorageErrorKind): string {
  switch (kind) {
    case "not_found":
      return "not found";
    case "already_exists":
      return "already exists";
    case "not_empty":
      return "not empty";
    case "invalid_path":
      return "invalid path";
    case "permission":
      return "permission denied";
    case "unsupported":
      return "unsupported";
    case "unavailable":
      return "backend unavailable";
    case "limit_exceeded":
      return "limit exceeded";
    case "conflict":
      return "conflict";
  }
}
