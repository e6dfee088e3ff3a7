/**
 * What the executor needs of the lease a plan is carried out under (docs/design/commit-protocol.md, fencing): a check
 * before every mutation, a signal that stops the mutations in flight once the lease is gone, and
 * a confirmation (a compare-and-swap of the lease) just before the state is written.
 */
export interface LeaseGuard {
  /** The run id the lease names; a replacement in place marks the state with it. */
  readonly runId: string;
  assertHeld(): void;
  confirm(): Promise<void>;
  readonly signal: AbortSignal;
  readonly lost: boolean;
}
