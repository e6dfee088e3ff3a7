import type { RunReport } from "@distributor/publish";
import type { RunActionSummary, RunSummary } from "@distributor/upload-store/wire";

/**
 * What a run record keeps of the run workflow's report (the wire record's `result`): its size
 * depends on the pipeline's destinations, never on the bundle's file count, so finished records
 * stay small.
 */
export type { RunActionSummary, RunSummary };

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
      release_id: action.release_id,
      preview_url: action.preview_url,
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
