import type { StorageErrorKind } from "@distributor/storage";
import {
  backendErrors,
  errorMessage,
  hasNativeCode,
  nativeCode,
  nativeErrorMapper,
} from "@distributor/storage/adapter";

export const BACKEND_NAME = "ssh";

export const sshError = backendErrors(BACKEND_NAME);

/** SFTP v3 status codes (draft-ietf-secsh-filexfer-02 §7). */
export const STATUS = {
  EOF: 1,
  NO_SUCH_FILE: 2,
  PERMISSION_DENIED: 3,
  FAILURE: 4,
  BAD_MESSAGE: 5,
  NO_CONNECTION: 6,
  CONNECTION_LOST: 7,
  OP_UNSUPPORTED: 8,
} as const;

const KIND_BY_STATUS: Record<number, StorageErrorKind> = {
  [STATUS.NO_SUCH_FILE]: "not_found",
  [STATUS.PERMISSION_DENIED]: "permission",
  [STATUS.OP_UNSUPPORTED]: "unsupported",
};

/** The SFTP status code of an ssh2 error, when it carries one. */
export const statusOf = (error: unknown) => nativeCode(error, "number");
export const hasStatus: (error: unknown, ...codes: number[]) => boolean = hasNativeCode;

/**
 * Maps an SFTP failure to a `StorageError`. OpenSSH reports most errno values (EEXIST,
 * ENOTEMPTY, ENOSPC) as the generic FAILURE, so those become `unavailable` with the server's
 * words unless the caller recognised them first.
 */
export const toStorageError = nativeErrorMapper(BACKEND_NAME, (error) => {
  const status = statusOf(error);
  const message = errorMessage(error);
  if (status === undefined) return { kind: "unavailable", detail: message };
  return {
    kind: KIND_BY_STATUS[status] ?? "unavailable",
    detail: `${message} (SFTP status ${status})`,
  };
});
