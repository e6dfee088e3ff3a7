import { StorageError, type StorageErrorKind, type StorageOperation } from "@distributor/storage";
import { backendErrors } from "@distributor/storage/adapter";

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
export function statusOf(error: unknown): number | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "number" ? code : undefined;
}

export function hasStatus(error: unknown, ...codes: number[]): boolean {
  const status = statusOf(error);
  return status !== undefined && codes.includes(status);
}

/**
 * Maps an SFTP failure to a `StorageError`. OpenSSH reports most errno values (EEXIST,
 * ENOTEMPTY, ENOSPC) as the generic FAILURE, so those become `unavailable` with the server's
 * words unless the caller recognised them first.
 */
export function toStorageError(
  error: unknown,
  operation: StorageOperation,
  path: string,
): StorageError {
  if (error instanceof StorageError) return error;
  const status = statusOf(error);
  const kind = (status !== undefined && KIND_BY_STATUS[status]) || "unavailable";
  const message = error instanceof Error ? error.message : String(error);
  const detail = status === undefined ? message : `${message} (SFTP status ${status})`;
  return sshError(kind, operation, path, detail, error);
}
