/**
 * A store that cannot be used: unreadable, held by another instance, unreachable. `code` is the
 * snake_case code the CLI reports (`store_unusable`, `store_in_use`, …). A store that cannot be
 * reached or is blocked for now throws `store_unavailable`, which the server answers with `503`
 * and `Retry-After`; any other code is a fault, answered `500`.
 */
export class UploadStoreError extends Error {
  override readonly name = "UploadStoreError";
  readonly code: string;

  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

/**
 * The store's `store_unavailable` that `error` is or was caused by, if any: the store cannot be
 * reached or is blocked for now, and the same call may succeed later. Compared by name, since a
 * store package may hold its own copy of this module.
 */
export function storeUnavailable(error: unknown): UploadStoreError | undefined {
  for (let current = error, depth = 0; current instanceof Error && depth < 4; depth++) {
    if (current.name === "UploadStoreError" && (current as UploadStoreError).code === UNAVAILABLE)
      return current as UploadStoreError;
    current = current.cause;
  }
  return undefined;
}

const UNAVAILABLE = "store_unavailable";
