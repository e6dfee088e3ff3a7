import type { AcceptedUpload, RunRecord } from "@distributor/upload-client";
import type { CommandOutcome } from "../../command.js";
import { summaryLine } from "../../render/text.js";

/** The JSON `result` of `upload`: the accepted record, and with `--wait` the finished run. */
export interface UploadReport {
  run_id: string;
  pipeline_id: string;
  /** The run's status: as accepted, as finished with `--wait`, or as it is now for a replay. */
  status: string;
  manifest: AcceptedUpload["manifest"];
  status_url: string;
  replayed: boolean;
  idempotency_key: string;
  /**
   * The `GET /runs/{id}` record: the final one with `--wait`, the current one for a replayed
   * upload, else null.
   */
  run: RunRecord | null;
}

/** A `GET /runs/{id}` record, and whether it is the one `--wait` waited for. */
export interface FetchedRun {
  record: RunRecord;
  final: boolean;
}

/**
 * `upload`: one summary line. Without `--wait` an accepted upload succeeds; with it the run's
 * outcome decides, and a failed run is a failure carrying the run's error.
 */
export function uploadOutcome(
  accepted: AcceptedUpload,
  fetched: FetchedRun | null,
): CommandOutcome {
  const run = fetched?.record ?? null;
  const report: UploadReport = {
    run_id: accepted.run_id,
    pipeline_id: accepted.pipeline_id,
    status: run?.status ?? accepted.status,
    manifest: accepted.manifest,
    status_url: accepted.status_url,
    replayed: accepted.replayed,
    idempotency_key: accepted.idempotency_key,
    run,
  };
  const text = [
    summaryLine("Upload", [
      ["run_id", report.run_id],
      ["pipeline", report.pipeline_id],
      ["status", report.status],
      ["manifest", report.manifest.id],
      ["digest", report.manifest.digest],
      ["replayed", report.replayed],
      ["idempotency_key", report.idempotency_key],
      ["status_url", report.status_url],
    ]),
  ];
  if (run === null || !fetched?.final || run.status !== "failed") {
    return { ok: true, result: report, text };
  }
  const error = {
    code: run.error?.code ?? "run_failed",
    message: `run ${run.run_id} failed${run.error === null ? "" : `: ${run.error.message}`}`,
  };
  return { ok: false, result: report, text, error };
}
