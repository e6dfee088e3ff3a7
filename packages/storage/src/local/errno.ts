import {
  errorMessage,
  hasNativeCode,
  nativeCode,
  nativeErrorMapper,
} from "../adapter/backend-error.js";
import { defaultDetail, type StorageErrorKind } from "../errors.js";

export const BACKEND_NAME = "local";

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

/** The errno name a Node filesystem error carries. */
export const errorCode = (error: unknown) => nativeCode(error, "string");
export const hasCode: (error: unknown, ...codes: string[]) => boolean = hasNativeCode;

/** Maps a Node filesystem error to a `StorageError` named by its errno. */
export const toStorageError = nativeErrorMapper(BACKEND_NAME, (error) => {
  const code = errorCode(error);
  const kind = (code && KIND_BY_CODE[code]) || "unavailable";
  const words =
    (code && DETAIL_BY_CODE[code]) ||
    (kind === "unavailable" ? errorMessage(error) : defaultDetail(kind));
  return { kind, detail: code && !words.includes(code) ? `${words} (${code})` : words };
});
