/**
 * Whether a failure of a call to PostgreSQL means the database cannot be reached or is blocked
 * for now (the same call may succeed later), rather than a fault of the call itself: a refused
 * or broken connection, a timeout, a server shutting down or out of connections, a lock that
 * was not granted in time. Only these are `store_unavailable`; a syntax error or a violated
 * constraint is a bug that no retry mends.
 */
export function isUnavailable(error: unknown, depth = 0): boolean {
  if (!(error instanceof Error) || depth > 4) return false;
  // A connection attempt that failed on every address (localhost: ::1 and 127.0.0.1).
  if (error instanceof AggregateError && error.errors.some((e) => isUnavailable(e, depth + 1)))
    return true;
  const code = (error as { code?: unknown }).code;
  if (typeof code === "string") {
    if (NETWORK_CODES.has(code)) return true;
    if (/^[0-9A-Z]{5}$/.test(code)) return unavailableState(code);
  }
  if (CLIENT_MESSAGES.has(error.message)) return true;
  return isUnavailable(error.cause, depth + 1);
}

/** Errors of the socket under a connection. */
const NETWORK_CODES: ReadonlySet<string> = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "EHOSTDOWN",
  "ENETUNREACH",
  "ENETDOWN",
  "ENOTFOUND",
  "EAI_AGAIN",
]);

/** What node-postgres and its pool say, without a code, when a connection fails or times out. */
const CLIENT_MESSAGES: ReadonlySet<string> = new Set([
  "Connection terminated",
  "Connection terminated unexpectedly",
  "Connection terminated due to connection timeout",
  "timeout exceeded when trying to connect",
  "timeout expired",
  "Query read timeout",
  "Client has encountered a connection error and is not queryable",
]);

/**
 * SQLSTATEs (PostgreSQL's appendix A) of a server that is away, overloaded or blocked:
 * connection exceptions (class 08), insufficient resources (class 53), shutdown and start-up
 * (57P01–57P03), a statement or lock wait cancelled by its timeout (57014, 55P03), a session
 * ended for idling in a transaction (25P03), and a transaction that lost a race (40001, 40P01).
 */
function unavailableState(state: string): boolean {
  return (
    state.startsWith("08") ||
    state.startsWith("53") ||
    ["57P01", "57P02", "57P03", "57014", "55P03", "25P03", "40001", "40P01"].includes(state)
  );
}
