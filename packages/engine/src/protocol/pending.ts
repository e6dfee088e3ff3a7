// Failures that leave work for the next run: what they name stays journaled in the abandoned lease,
// and the recovery of whoever takes the lease next finishes it (docs/design/commit-protocol.md).

/**
 * A failure before the state was known to be written. `pending` (bundle-relative) are the paths
 * this attempt may have created and did not remove: they stay journaled (the lease is abandoned,
 * not released) so that the next run's recovery removes whichever no state records.
 */
export class UncommittedError extends Error {
  override readonly name = "UncommittedError";
  readonly pending: readonly string[];

  constructor(message: string, pending: readonly string[], options?: { cause?: unknown }) {
    super(message, options);
    this.pending = pending;
  }
}

/**
 * The new state is written but deleting what it no longer records failed: the publication
 * stands, and `pending` (bundle-relative) must stay journaled so the next run removes them.
 */
export class PendingDeletesError extends Error {
  override readonly name = "PendingDeletesError";
  readonly code = "delete_failed";
  readonly pending: readonly string[];

  constructor(message: string, pending: readonly string[], options?: { cause?: unknown }) {
    super(message, options);
    this.pending = pending;
  }
}
