/**
 * The one error type of this package. Messages are contract: they start with `state ` (or
 * `parse distributor state:`) and name the offending field, so operators can grep for them.
 */
export class StateError extends Error {
  override readonly name = "StateError";
  /** The CLI's JSON `error.code` for every state problem. */
  readonly code = "state_invalid";

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** Message of an unknown thrown value, for wrapping errors from other packages. */
export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
