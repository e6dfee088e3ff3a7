import {
  defaultDetail,
  StorageError,
  type StorageErrorKind,
  type StorageOperation,
} from "../errors.js";

export const BACKEND_NAME = "local";

interface NativeError {
  code?: unknown;
}

const KIND_BY_CODE: Record<string, StorageErrorKind> = {
  ENOENT: "not_found",
  ENOTDIR: "not_found",
  EEXIST: "already_exists",
  ENOTEMPTY: "not_empty",
  EACCES: "permission",
  EPERM: "permission",
  EROFS: "permission",
  ELOOP: "unsupported",
  EISDIR: "unsupported",
  EXDEV: "unsupported",
  ENOTSUP: "unsupported",
  EOPNOTSUPP: "unsupported",
  ENAMETOOLONG: "invalid_path",
};

const DETAIL_BY_CODE: Record<string, string> = {
  ELOOP: "symlink refused",
  EISDIR: "is a directory",
  ENAMETOOLONG: "name too long for the filesystem",
};

export function errorCode(error: unknown): string | undefined {
  if (typeof error !== "object" || error === null) return undefined;
  const code = (error as NativeError).code;
  return typeof code === "string" ? code : undefined;
}

export function hasCode(error: unknown, ...codes: string[]): boolean {
  const code = errorCode(error);
  return code !== undefined && codes.includes(code);
}

/** Maps a Node filesystem error to a `StorageError`; `StorageError`s pass through unchanged. */
export function toStorageError(
  error: unknown,
  operation: StorageOperation,
  path: string,
): StorageError {
  if (error instanceof StorageError) return error;
  const code = errorCode(error);
  const kind = (code && KIND_BY_CODE[code]) || "unavailable";
  const words =
    (code && DETAIL_BY_CODE[code]) ||
    (kind === "unavailable" ? messageOf(error) : defaultDetail(kind));
  const detail = code && !words.includes(code) ? `${words} (${code})` : words;
  return new StorageError({ kind, operation, backend: BACKEND_NAME, path, detail, cause: error });
}

function messageOf(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}
