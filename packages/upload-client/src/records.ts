/** Statuses of an upload run (SPEC §10). */
export type RunStatus = "accepted" | "queued" | "running" | "succeeded" | "failed";

export const RUN_STATUSES: readonly RunStatus[] = [
  "accepted",
  "queued",
  "running",
  "succeeded",
  "failed",
];

/** A run that will not change any more. */
export function isFinished(status: RunStatus): boolean {
  return status === "succeeded" || status === "failed";
}

/** The identity of the uploaded bundle, as the server read it from `manifest.json`. */
export interface ManifestIdentity {
  id: string;
  digest: string;
  created: string;
}

/** The body of `202 Accepted` (and of a `200` replay), with what the headers said. */
export interface AcceptedUpload {
  run_id: string;
  pipeline_id: string;
  status: RunStatus;
  manifest: ManifestIdentity;
  /** The run's status URL, resolved against the server URL. */
  status_url: string;
  /** True when the server answered a retry of an upload it had already accepted (`Idempotency-Replayed`). */
  replayed: boolean;
  /** The `Idempotency-Key` sent (the given one, or the one generated). */
  idempotency_key: string;
}

/** The body of `GET /runs/{run_id}`. */
export interface RunRecord {
  run_id: string;
  pipeline_id: string;
  status: RunStatus;
  accepted_at: string | null;
  started_at: string | null;
  finished_at: string | null;
  manifest: ManifestIdentity | null;
  /** The run report (the `run` result of `@distributor/publish`) once the run has one. */
  result: unknown;
  error: { code: string; message: string } | null;
}

/** Why a response body is not the record expected, or undefined when it is. */
type Problem = string | undefined;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function stringField(body: Record<string, unknown>, key: string): Problem {
  return typeof body[key] === "string" && body[key] !== "" ? undefined : `${key} must be a string`;
}

function nullableString(body: Record<string, unknown>, key: string): Problem {
  const value = body[key];
  return value === undefined || value === null || typeof value === "string"
    ? undefined
    : `${key} must be a string or null`;
}

function statusProblem(body: Record<string, unknown>): Problem {
  return RUN_STATUSES.includes(body.status as RunStatus)
    ? undefined
    : `status must be one of ${RUN_STATUSES.join(", ")}, got ${JSON.stringify(body.status)}`;
}

function manifestProblem(value: unknown, key: string): Problem {
  if (!isObject(value)) return `${key} must be an object`;
  for (const field of ["id", "digest", "created"]) {
    if (typeof value[field] !== "string") return `${key}.${field} must be a string`;
  }
  return undefined;
}

function identity(value: Record<string, unknown>): ManifestIdentity {
  return { id: String(value.id), digest: String(value.digest), created: String(value.created) };
}

/** Reads the accepted-upload body; a string is the problem found. */
export function parseAccepted(
  body: unknown,
): Omit<AcceptedUpload, "replayed" | "idempotency_key"> | string {
  if (!isObject(body)) return "body must be a JSON object";
  const problem =
    stringField(body, "run_id") ??
    stringField(body, "pipeline_id") ??
    statusProblem(body) ??
    manifestProblem(body.manifest, "manifest") ??
    nullableString(body, "status_url");
  if (problem !== undefined) return problem;
  return {
    run_id: body.run_id as string,
    pipeline_id: body.pipeline_id as string,
    status: body.status as RunStatus,
    manifest: identity(body.manifest as Record<string, unknown>),
    status_url: typeof body.status_url === "string" ? body.status_url : "",
  };
}

/** Reads a run status body; a string is the problem found. */
export function parseRunRecord(body: unknown): RunRecord | string {
  if (!isObject(body)) return "body must be a JSON object";
  const problem =
    stringField(body, "run_id") ??
    stringField(body, "pipeline_id") ??
    statusProblem(body) ??
    nullableString(body, "accepted_at") ??
    nullableString(body, "started_at") ??
    nullableString(body, "finished_at") ??
    (body.manifest === undefined || body.manifest === null
      ? undefined
      : manifestProblem(body.manifest, "manifest")) ??
    errorProblem(body.error);
  if (problem !== undefined) return problem;
  const error = body.error as { code: string; message: string } | null | undefined;
  return {
    run_id: body.run_id as string,
    pipeline_id: body.pipeline_id as string,
    status: body.status as RunStatus,
    accepted_at: (body.accepted_at as string | null | undefined) ?? null,
    started_at: (body.started_at as string | null | undefined) ?? null,
    finished_at: (body.finished_at as string | null | undefined) ?? null,
    manifest: isObject(body.manifest) ? identity(body.manifest) : null,
    result: body.result ?? null,
    error: error == null ? null : { code: error.code, message: error.message },
  };
}

function errorProblem(value: unknown): Problem {
  if (value === undefined || value === null) return undefined;
  if (!isObject(value) || typeof value.code !== "string" || typeof value.message !== "string") {
    return "error must be null or {code, message}";
  }
  return undefined;
}

/** The `{"error": {"code", "message"}}` body of a refusal, when the body is one. */
export function parseErrorBody(body: unknown): { code: string; message: string } | undefined {
  if (!isObject(body) || !isObject(body.error)) return undefined;
  const { code, message } = body.error;
  if (typeof code !== "string" || code === "" || typeof message !== "string") return undefined;
  return { code, message };
}
