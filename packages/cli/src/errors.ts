import type { CommandFailure } from "./command.js";

/** Exit status of a successful command. */
export const EXIT_OK = 0;
/** Exit status of a command that ran and failed (including any failed destination). */
export const EXIT_FAILURE = 1;
/** Exit status of a command line that could not be understood. */
export const EXIT_USAGE = 2;

/**
 * The command line itself is wrong: a missing or conflicting flag, a bad flag value, an unknown
 * command. Reported as `distributor: <message>` on stderr, nothing on stdout, exit status 2.
 */
export class UsageError extends Error {
  override readonly name = "UsageError";
}

export function isUsageError(error: unknown): error is UsageError {
  return error instanceof UsageError;
}

/**
 * The envelope error for a failure. The code vocabulary belongs to `@distributor/publish`, loaded
 * only now so that commands which never fail this way do not pay for it.
 */
export async function describeFailure(error: unknown): Promise<CommandFailure> {
  const message = errorMessage(error);
  try {
    const { errorCode } = await import("@distributor/publish");
    return { code: errorCode(error), message };
  } catch {
    return { code: "failed", message };
  }
}

/** The human message for a failure, without a `distributor:` prefix. */
export function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}
