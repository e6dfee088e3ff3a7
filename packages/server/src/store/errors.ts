/**
 * A store that cannot be used: unreadable, held by another instance, unreachable. `code` is the
 * snake_case code the CLI reports (`store_unusable`, `store_in_use`, …).
 */
export class UploadStoreError extends Error {
  override readonly name = "UploadStoreError";
  readonly code: string;

  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}
