/**
 * How long a session of the store may hold a transaction open without a statement running, or
 * wait for a lock, before PostgreSQL ends it (`idle_in_transaction_session_timeout`) or the
 * statement (`lock_timeout`): half the claim timeout, at least a second. A `serve` that stalls
 * inside a transaction (SIGSTOP, a paused VM; its connection stays open) then holds its locks
 * for this long at most, and nothing of the store waits on a lock longer.
 */
export function stallLimitMs(claimTimeoutMs: number): number {
  return Math.max(1000, Math.floor(claimTimeoutMs / 2));
}

/** What every connection of the store sets: its bounds, and a name that says whose it is. */
export function sessionSettings(
  schema: string,
  instanceId: string,
  claimTimeoutMs: number,
): { application_name: string; idle_in_transaction_session_timeout: number; lock_timeout: number } {
  const limit = stallLimitMs(claimTimeoutMs);
  return {
    // PostgreSQL keeps the first 63 bytes; the schema comes first, for `applicationPrefix`.
    application_name: `${applicationPrefix(schema)}${instanceId}`,
    idle_in_transaction_session_timeout: limit,
    lock_timeout: limit,
  };
}

/** The start of `application_name` of every session of the store in `schema`. */
export function applicationPrefix(schema: string): string {
  return `distributor ${schema} `;
}

/**
 * Taking a run holds, until its transaction ends, one advisory lock per pipeline: its two keys,
 * for `pg_try_advisory_xact_lock(hashtext(first), hashtext(second))`.
 */
export function takeLockKeys(schema: string, pipelineId: string): [string, string] {
  return [`distributor-take:${schema}`, pipelineId];
}
