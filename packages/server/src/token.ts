/** An upload token with its secret resolved; the value never leaves this module's callers. */
export interface ResolvedToken {
  id: string;
  allowPipelines: ReadonlySet<string>;
  /** SHA-256 of the token: equal-length values to compare in constant time. */
  digest: Buffer;
}
