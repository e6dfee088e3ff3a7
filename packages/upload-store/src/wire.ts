import * as v from "valibot";

// The records of the HTTP upload API (docs/integrations/http-upload.md), defined once: `distributor serve` builds its
// answers with these types and its tests parse every answer with these schemas; the client
// validates every answer it reads with them. Objects accept fields they do not know (and drop
// them), so a newer server that adds a field does not break an older client.

/** Statuses of an upload run, in lifecycle order. */
export const RUN_STATUSES = ["accepted", "queued", "running", "succeeded", "failed"] as const;

export const RunStatusSchema = v.picklist(RUN_STATUSES);
/** Statuses of an upload run (docs/integrations/http-upload.md). */
export type RunStatus = v.InferOutput<typeof RunStatusSchema>;

const nonEmptyString = v.pipe(v.string(), v.minLength(1, "must not be empty"));

/** The identity of an uploaded bundle, as the server read it from `manifest.json`. */
export const ManifestIdentitySchema = v.object({
  id: v.string(),
  digest: v.string(),
  created: v.string(),
});
export type ManifestIdentity = v.InferOutput<typeof ManifestIdentitySchema>;

/** A documented code and a message: the `error` of a refusal, of a run, of an action. */
export const ErrorDetailSchema = v.object({
  code: nonEmptyString,
  message: v.string(),
});
export type ErrorDetail = v.InferOutput<typeof ErrorDetailSchema>;

/** The body of every refusal: `{"error": {"code", "message"}}`. */
export const ErrorBodySchema = v.object({ error: ErrorDetailSchema });
export type ErrorBody = v.InferOutput<typeof ErrorBodySchema>;

/** The body of `202 Accepted` (and of a `200` replay of it). */
export const AcceptedBodySchema = v.object({
  run_id: nonEmptyString,
  pipeline_id: nonEmptyString,
  status: RunStatusSchema,
  manifest: ManifestIdentitySchema,
  /** The run's status URL, relative to the server (`/runs/{run_id}`). */
  status_url: nonEmptyString,
});
export type AcceptedBody = v.InferOutput<typeof AcceptedBodySchema>;

/** One destination action of a finished run, without its list of outputs. */
export const RunActionSummarySchema = v.object({
  destination_id: v.string(),
  bundle_path: v.string(),
  action: v.nullable(v.string()),
  status: v.string(),
  primary_url: v.nullable(v.string()),
  /**
   * The release a `staged` action committed (or a `promoted` one made live) under `layout:
   * releases`; null otherwise. Absent in records of servers before staged releases.
   */
  release_id: v.optional(v.nullable(v.string())),
  /** Where a staged release can be looked at (`releases.preview_url`); null otherwise. */
  preview_url: v.optional(v.nullable(v.string())),
  /** How many outputs the action wrote or kept. */
  outputs: v.pipe(v.number(), v.integer(), v.minValue(0)),
  error: v.nullable(ErrorDetailSchema),
});
export type RunActionSummary = v.InferOutput<typeof RunActionSummarySchema>;

/**
 * The `result` of a finished run: a summary of the run report whose size depends on the
 * pipeline's destinations, never on the bundle's file count.
 */
export const RunSummarySchema = v.object({
  /** Actions per status (`published`, `skipped`, `failed`, ...). */
  counts: v.record(v.string(), v.pipe(v.number(), v.integer(), v.minValue(0))),
  actions: v.array(RunActionSummarySchema),
  pipeline_errors: v.array(ErrorDetailSchema),
  interrupted: v.boolean(),
});
export type RunSummary = v.InferOutput<typeof RunSummarySchema>;

/** The body of `GET /runs/{run_id}`. */
export const RunRecordSchema = v.object({
  run_id: nonEmptyString,
  pipeline_id: nonEmptyString,
  status: RunStatusSchema,
  accepted_at: v.string(),
  started_at: v.nullable(v.string()),
  finished_at: v.nullable(v.string()),
  manifest: ManifestIdentitySchema,
  /** The run's summary once it has finished with a report; null before, or when it had none. */
  result: v.nullable(RunSummarySchema),
  error: v.nullable(ErrorDetailSchema),
});
export type RunRecord = v.InferOutput<typeof RunRecordSchema>;

/** The body of `GET /runs`: one page of the token's runs, newest first. */
export const RunPageSchema = v.object({
  runs: v.array(RunRecordSchema),
  /** Pass as `cursor` for the next page; null on the last one. */
  next_cursor: v.nullable(v.string()),
});
export type RunPage = v.InferOutput<typeof RunPageSchema>;

/**
 * The body of `POST /runs/{run_id}/cancel`: the run's record, failed with `cancelled` when it was
 * still queued (200), or as it is with `cancel_requested: true` when it is running (202).
 */
export const CancelAnswerSchema = v.object({
  ...RunRecordSchema.entries,
  cancel_requested: v.optional(v.literal(true)),
});
export type CancelAnswer = v.InferOutput<typeof CancelAnswerSchema>;

/** The body of `GET /healthz`. */
export const HealthBodySchema = v.object({ ok: v.literal(true) });
export type HealthBody = v.InferOutput<typeof HealthBodySchema>;

/** Any of the schemas above. */
export type WireSchema = v.GenericSchema<unknown, unknown>;

/** A finished run will not change any more. */
export function isFinished(status: RunStatus): boolean {
  return status === "succeeded" || status === "failed";
}

/**
 * Checks `body` against `schema`: the typed value, or a sentence naming the first field that is
 * wrong (`manifest.digest must be a string, got 7`).
 */
export function parseWire<const S extends WireSchema>(
  schema: S,
  body: unknown,
): { ok: true; value: v.InferOutput<S> } | { ok: false; problem: string } {
  const result = v.safeParse(schema, body);
  if (result.success) return { ok: true, value: result.output };
  return { ok: false, problem: describeIssue(result.issues[0]) };
}

function describeIssue(issue: v.BaseIssue<unknown>): string {
  const path = v.getDotPath(issue);
  const subject = path === null || path === "" ? "body" : path;
  if (issue.kind === "validation") return `${subject} ${issue.message}`;
  if (issue.input === undefined) return `${subject} is missing`;
  return `${subject} must be ${expectedText(issue.expected)}, got ${issue.received}`;
}

const ARTICLES: Record<string, string> = {
  string: "a string",
  number: "a number",
  boolean: "a boolean",
  Object: "an object",
  Array: "an array",
  null: "null",
};

function expectedText(expected: string | null): string {
  if (expected === null) return "valid";
  return expected
    .replace(/^\((.*)\)$/, "$1")
    .split(" | ")
    .map((part) => ARTICLES[part] ?? part)
    .join(" or ");
}
