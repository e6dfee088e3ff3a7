/** One JSON log line's worth of what the server did; tokens never appear, only their ids. */
export type UploadServerEvent =
  | { type: "listening"; address: string; url: string }
  | {
      type: "request";
      method: string;
      path: string;
      status: number;
      duration_ms: number;
      token_id: string | null;
      pipeline_id: string | null;
      run_id: string | null;
      error_code: string | null;
      replayed: boolean;
      /** Body bytes of an upload (0 for other requests). */
      received_bytes: number;
    }
  | {
      type: "run";
      run_id: string;
      pipeline_id: string;
      status: "succeeded" | "failed";
      /** Null for a run cancelled before it started. */
      started_at: string | null;
      finished_at: string;
      duration_ms: number;
      error: { code: string; message: string } | null;
    }
  | {
      type: "recovered";
      /** Runs resumed from the store (queued again, including those that were running). */
      resumed: number;
      /** Staged directories removed because no live run owned them. */
      removed_staging: number;
      /** Live runs whose staged bundle was missing; they are recorded failed. */
      lost: number;
    }
  | {
      /** A run changed state (its finish is the `run` event). */
      type: "run_state";
      run_id: string;
      pipeline_id: string;
      /**
       * `resumed`: this instance took the run over from one whose claim had lapsed;
       * `taken_over`: another instance took it over from this one.
       */
      state: "queued" | "resumed" | "started" | "cancel_requested" | "taken_over";
    }
  | { type: "warning"; message: string }
  | { type: "shutdown"; phase: "started" | "finished"; running: number };

/** How much a server event matters, for `server.log.level`. */
export type LogLevel = "debug" | "info" | "warn" | "error";

/** The level of each event: failures warn or err, the rest informs. */
export function eventLevel(event: UploadServerEvent): LogLevel {
  switch (event.type) {
    case "request":
      return event.status >= 500 ? "error" : "info";
    case "run":
      return event.status === "failed" ? "warn" : "info";
    case "warning":
      return "warn";
    default:
      return "info";
  }
}
