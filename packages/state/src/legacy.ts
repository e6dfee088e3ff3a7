import type { ReconciliationPolicy, StatePolicy } from "./types.js";

/**
 * What a schema 1 document leaves out and how reading fills it in. Schema 1 predates state modes,
 * reconciliation and per-record timestamps: it is single-owner `replace` state, and every
 * timestamp is the publication time. Reading normalises in memory only; the file is rewritten as
 * schema 2 only when a later publication writes state anyway.
 */
export interface LegacyDefaults {
  createdAt: Date;
  updatedAt: Date;
  state: StatePolicy<"single_owner">;
  reconciliation: ReconciliationPolicy;
  /** Timestamps given to every output record. */
  outputCreatedAt: Date;
  outputUpdatedAt: Date;
}

export function legacyDefaults(publishedAt: Date): LegacyDefaults {
  return {
    createdAt: new Date(publishedAt),
    updatedAt: new Date(publishedAt),
    state: { mode: "single_owner" },
    reconciliation: { mode: "replace" },
    outputCreatedAt: new Date(publishedAt),
    outputUpdatedAt: new Date(publishedAt),
  };
}
