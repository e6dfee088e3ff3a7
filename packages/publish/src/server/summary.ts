import type { RunReport } from "../workflows/run.js";

/** One destination action of a finished upload run, without its list of outputs. */
export interface RunActionSummary {
  destination_id: string;
  bundle_path: string;
  action: string | null;
  status: string;
  primary_url: string | null;
  /** How many outputs the action wrote or kept. */
  outputs: number;
  /** As in the run report: a documented code and the message (cut to a bounded length). */
  error: { code: string; message: string } | null;
}

/**
 * What a run record keeps of the run workflow's report: its size depends on the pipeline's
 * destinations, never on the bundle's file count, so finished records stay small.
 */
export interface RunSummary {
  /** Actions per status (`published`, `skipped`, `failed`, ...). */
  counts: Record<string, number>;
  actions: RunActionSummary[];
  pipeline_errors: { code: string; message: string }[];
  interrupted: boolean;
}

/** Longest error text kept per action; a longer one is cut with an ellipsis. */
export const MAX_SUMMARY_ERROR_LENGTH = 2000;

/** The bounded summary of `report` a run record keeps. */
export function summarizeRun(report: RunReport): RunSummary {
  const counts: Record<string, number> = {};
  for (const action of report.actions) counts[action.status] = (counts[action.status] ?? 0) + 1;
  return {
    counts,
    actions: report.actions.map((action) => ({
      destination_id: action.destination_id,
      bundle_path: action.bundle_path,
      action: action.action,
      status: action.status,
      primary_url: action.primary_url,
      outputs: action.outputs.length,
      error:
        action.error === null
          ? null
          : { code: action.error.code, message: cut(action.error.message) },
    })),
    pipeline_errors: report.pipeline_errors.map(({ code, message }) => ({
      code,
      message: cut(message),
    })),
    interrupted: report.interrupted,
  };
}

function cut(text: string): string {
  return text.length <= MAX_SUMMARY_ERROR_LENGTH
    ? text
    : `${text.slice(0, MAX_SUMMARY_ERROR_LENGTH - 1)}…`;
}
