import type { AcceptedBody } from "./wire.js";

export {
  isFinished,
  type ManifestIdentity,
  RUN_STATUSES,
  type RunRecord,
  type RunStatus,
} from "./wire.js";

/** The body of `202 Accepted` (and of a `200` replay), with what the headers said. */
export interface AcceptedUpload extends AcceptedBody {
  /** The run's status URL, resolved against the server URL. */
  status_url: string;
  /** True when the server answered a retry of an upload it had already accepted (`Idempotency-Replayed`). */
  replayed: boolean;
  /** The `Idempotency-Key` sent (the given one, or the one generated). */
  idempotency_key: string;
}
