import type { SingleOwnerState } from "./types.js";

/** The fields schema 2 added to single-owner state. */
export type SchemaTwoFields = Pick<
  SingleOwnerState,
  "createdAt" | "updatedAt" | "state" | "reconciliation"
>;

/**
 * How reading fills in what a schema 1 document leaves out. Schema 1 predates state modes,
 * reconciliation and per-record timestamps: it is single-owner `replace` state, and every
 * timestamp, the output records' too, is the publication time. Reading normalises in memory only;
 * the file is rewritten as schema 2 only when a later publication or repair writes state anyway.
 */
export function legacyDefaults(publishedAt: Date): SchemaTwoFields {
  return {
    createdAt: new Date(publishedAt),
    updatedAt: new Date(publishedAt),
    state: { mode: "single_owner" },
    reconciliation: { mode: "replace" },
  };
}
