import { randomUUID } from "node:crypto";
import type {
  UploadJob,
  UploadRunRecord,
  UploadRunStatus,
  UploadStore,
} from "@distributor/upload-store";
import { UploadStoreError } from "@distributor/upload-store";
import type { StoreContext } from "./context.js";
import type { KeyClaims } from "./keys.js";
import { takeLockKeys } from "./session.js";
import type { RunWatch } from "./watch.js";

const LIVE: readonly UploadRunStatus[] = ["accepted", "queued", "running"];
/** Pipelines one take looks at, at most: enough to pass those that other instances are taking. */
const TAKE_CANDIDATES = 16;
const isLive = (status: UploadRunStatus) => LIVE.includes(status);

export type RunQueries = Omit<
  UploadStore,
  "durable" | "pollIntervalMs" | "claimKey" | "releaseKey" | "watchRun" | "close"
>;

/**
 * Run records and the queue: rows of `upload_runs`. A run is claimed by an instance with a claim
 * token, and a change by an instance whose claim was taken over is refused.
 */
export function createRunQueries(
  ctx: StoreContext,
  watch: Pick<RunWatch, "remember" | "notify">,
  keys: Pick<KeyClaims, "settleLocal">,
): RunQueries {
  const { options, db, schema, s, me, alive } = ctx;
  const { query, transaction } = db;
  const { remember, notify } = watch;
  const { settleLocal } = keys;
  /** Claim tokens of the runs this instance took: its changes to them are fenced by these. */
  const claims = new Map<string, string>();
  let reserved = 0;

  const jobOf = (value: unknown) => value as UploadJob;

  const runs: RunQueries = {
    async recover() {
      return transaction("recovering", async (client) => {
        // What this instance held before a restart under the same name is queued again now.
        await client.query(
          `UPDATE ${s}.upload_runs SET
             status = CASE WHEN status = 'running' THEN 'queued' ELSE status END,
             record = CASE WHEN status = 'running'
               THEN record || '{"status": "queued", "started_at": null}'::jsonb ELSE record END,
             claimed_by = NULL, claim_token = NULL, version = version + 1
           WHERE claimed_by = $1 AND job IS NOT NULL`,
          [me],
        );
        await client.query(
          `DELETE FROM ${s}.upload_keys WHERE run_id IS NULL AND claimed_by = $1`,
          [me],
        );
        await client.query(
          `DELETE FROM ${s}.upload_instances
           WHERE id <> $1 AND heartbeat_at < now() - interval '1 day'`,
          [me],
        );
        const live = await client.query<{ job: unknown }>(
          `SELECT job FROM ${s}.upload_runs WHERE job IS NOT NULL ORDER BY seq`,
        );
        return live.rows.map((row) => jobOf(row.job));
      });
    },

    async reserveQueueSlot() {
      // Counted before the query, so two requests of this process cannot both take the last place.
      reserved += 1;
      try {
        const queued = await runs.queueLength();
        if (queued <= options.queueSize) return true;
      } catch (error) {
        reserved -= 1;
        throw error;
      }
      reserved -= 1;
      return false;
    },

    async releaseQueueSlot() {
      reserved = Math.max(0, reserved - 1);
    },

    async enqueue(stored, job, accepted, scope) {
      const record = stored.record;
      await transaction("accepting an upload", async (client) => {
        await client.query(
          `INSERT INTO ${s}.upload_runs
             (run_id, token_id, pipeline_id, status, finished_at, record, job)
           VALUES ($1, $2, $3, $4, $5, $6, $7)`,
          [
            record.run_id,
            stored.tokenId,
            record.pipeline_id,
            record.status,
            record.finished_at,
            JSON.stringify(record),
            JSON.stringify(job),
          ],
        );
        if (scope === undefined) return;
        const params = [
          scope.tokenId,
          scope.pipelineId,
          scope.key,
          record.run_id,
          JSON.stringify(accepted),
          job.configDigest ?? null,
        ];
        const bound = await client.query(
          `UPDATE ${s}.upload_keys SET run_id = $4, accepted = $5, config_digest = $6,
             claimed_by = NULL
           WHERE token_id = $1 AND pipeline_id = $2 AND key = $3 AND run_id IS NULL
             AND (claimed_by = $7 OR claimed_by IS NULL)`,
          [...params, me],
        );
        if (bound.rowCount === 1) return;
        const inserted = await client.query(
          `INSERT INTO ${s}.upload_keys (token_id, pipeline_id, key, run_id, accepted, config_digest)
           VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`,
          params,
        );
        if (inserted.rowCount !== 1) {
          throw new UploadStoreError(
            "idempotency_key_taken",
            `Idempotency-Key ${JSON.stringify(scope.key)} was taken by another instance while this upload staged`,
          );
        }
      });
      reserved = Math.max(0, reserved - 1);
      if (scope !== undefined) settleLocal(scope);
    },

    async takeNext(busyPipelines) {
      const taken = await transaction("taking a queued run", async (client) => {
        // Each pipeline's oldest live run that no live instance holds, while no live instance
        // holds another of its runs: the candidates, oldest first.
        const candidates = await client.query<{ run_id: string; pipeline_id: string }>(
          `SELECT run_id, pipeline_id FROM (
             SELECT DISTINCT ON (r.pipeline_id) r.run_id, r.pipeline_id, r.seq
             FROM ${s}.upload_runs r
             WHERE r.job IS NOT NULL
               AND NOT ${alive("r.claimed_by")}
               AND NOT (r.pipeline_id = ANY($1::text[]))
               AND NOT EXISTS (
                 SELECT 1 FROM ${s}.upload_runs o
                 WHERE o.pipeline_id = r.pipeline_id AND o.job IS NOT NULL
                   AND o.run_id <> r.run_id AND ${alive("o.claimed_by")})
             ORDER BY r.pipeline_id, r.seq) oldest
           ORDER BY seq LIMIT $2`,
          [[...busyPipelines], TAKE_CANDIDATES],
        );
        for (const candidate of candidates.rows) {
          // One taker per pipeline at a time, and no waiting: a pipeline another instance is
          // taking from now (or stalled while it did) is skipped, every other one goes on.
          const [first, second] = takeLockKeys(schema, candidate.pipeline_id);
          const locked = await client.query<{ locked: boolean }>(
            "SELECT pg_try_advisory_xact_lock(hashtext($1), hashtext($2)) AS locked",
            [first, second],
          );
          if (locked.rows[0]?.locked !== true) continue;
          // Under the pipeline's lock the check is current: a claim of another taker of this
          // pipeline was committed before its lock was released.
          const token = randomUUID();
          const claimed = await client.query<{ job: unknown; lapsed: boolean }>(
            `UPDATE ${s}.upload_runs r SET claimed_by = $2, claim_token = $3, version = r.version + 1
             FROM (SELECT run_id, claimed_by FROM ${s}.upload_runs WHERE run_id = $1 FOR UPDATE) before
             WHERE r.run_id = before.run_id AND r.job IS NOT NULL AND NOT ${alive("r.claimed_by")}
               AND NOT EXISTS (
                 SELECT 1 FROM ${s}.upload_runs o
                 WHERE o.pipeline_id = r.pipeline_id AND o.job IS NOT NULL
                   AND o.run_id <> r.run_id AND ${alive("o.claimed_by")})
             RETURNING r.job, before.claimed_by IS NOT NULL AS lapsed`,
            [candidate.run_id, me, token],
          );
          const row = claimed.rows[0];
          if (row === undefined) continue;
          // A claim that is no longer alive is another instance's that lapsed: a takeover.
          const job = jobOf(row.job);
          return {
            runId: candidate.run_id,
            token,
            job: row.lapsed ? { ...job, takenOver: true } : job,
          };
        }
        return undefined;
      });
      if (taken === undefined) return undefined;
      claims.set(taken.runId, taken.token);
      return taken.job;
    },

    async dequeue(runId) {
      const token = randomUUID();
      const result = await query<{ job: unknown }>(
        "taking a run out of the queue",
        `UPDATE ${s}.upload_runs SET claimed_by = $2, claim_token = $3, version = version + 1
         WHERE run_id = $1 AND job IS NOT NULL AND NOT ${alive("claimed_by")}
         RETURNING job`,
        [runId, me, token],
      );
      const row = result.rows[0];
      if (row === undefined) return undefined;
      claims.set(runId, token);
      return jobOf(row.job);
    },

    async queueLength() {
      const result = await query<{ count: string }>(
        "counting the queue",
        `SELECT count(*) AS count FROM ${s}.upload_runs
         WHERE job IS NOT NULL AND NOT ${alive("claimed_by")}`,
      );
      return Number(result.rows[0]?.count ?? 0) + reserved;
    },

    async stagedBytes() {
      const result = await query<{ total: string | null }>(
        "summing staged bytes",
        `SELECT sum((job->>'stagedBytes')::bigint) AS total FROM ${s}.upload_runs
         WHERE job IS NOT NULL`,
      );
      return Number(result.rows[0]?.total ?? 0);
    },

    async getRun(runId) {
      const result = await query<{ record: UploadRunRecord; token_id: string; version: string }>(
        "reading a run",
        `SELECT record, token_id, version FROM ${s}.upload_runs WHERE run_id = $1`,
        [runId],
      );
      const row = result.rows[0];
      if (row === undefined) return undefined;
      remember(runId, Number(row.version));
      return { record: row.record, tokenId: row.token_id };
    },

    async updateRun(runId, change) {
      const token = claims.get(runId) ?? null;
      const merged = `(record || $2::jsonb)`;
      const live = `(${merged}->>'status') IN ('accepted', 'queued', 'running')`;
      const result = await query<{ status: UploadRunStatus }>(
        "recording a run",
        `UPDATE ${s}.upload_runs SET
           record = ${merged},
           status = ${merged}->>'status',
           finished_at = (${merged}->>'finished_at')::timestamptz,
           job = CASE WHEN ${live} THEN job END,
           claimed_by = CASE WHEN ${live} THEN claimed_by END,
           claim_token = CASE WHEN ${live} THEN claim_token END,
           version = version + 1
         WHERE run_id = $1 AND job IS NOT NULL
           AND ($3::uuid IS NULL OR claim_token = $3::uuid)
         RETURNING status`,
        [runId, JSON.stringify(change), token],
      );
      const status = result.rows[0]?.status;
      notify(runId);
      // Refused: the claim was taken over (or the run is gone). The stale token is kept, so that
      // every later change this instance tries is refused as well: sending none would pass the
      // fence (a run this instance never took is updated without a token).
      if (status === undefined) return false;
      if (!isLive(status)) claims.delete(runId);
      return true;
    },

    async requestCancel(runId, reason) {
      await query(
        "asking a run to stop",
        `UPDATE ${s}.upload_runs SET cancel_reason = $2 WHERE run_id = $1 AND job IS NOT NULL`,
        [runId, reason],
      );
    },

    async cancelRequests(runIds) {
      const result = await query<{ run_id: string; cancel_reason: string }>(
        "reading requests to stop",
        `SELECT run_id, cancel_reason FROM ${s}.upload_runs
         WHERE run_id = ANY($1::text[]) AND job IS NOT NULL AND cancel_reason IS NOT NULL`,
        [[...runIds]],
      );
      return new Map(result.rows.map((row) => [row.run_id, row.cancel_reason]));
    },

    async listRuns(queryOptions) {
      const before = queryOptions.cursor === undefined ? null : Number(queryOptions.cursor);
      const result = await query<{ seq: string; record: UploadRunRecord }>(
        "listing runs",
        `SELECT seq, record FROM ${s}.upload_runs
         WHERE token_id = $1
           AND ($2::text IS NULL OR pipeline_id = $2)
           AND ($3::text IS NULL OR status = $3)
           AND ($4::bigint IS NULL OR seq < $4)
         ORDER BY seq DESC LIMIT $5`,
        [
          queryOptions.tokenId,
          queryOptions.pipelineId ?? null,
          queryOptions.status ?? null,
          before !== null && Number.isFinite(before) ? before : null,
          queryOptions.limit + 1,
        ],
      );
      const rows = result.rows.slice(0, queryOptions.limit);
      const more = result.rows.length > queryOptions.limit;
      return {
        runs: rows.map((row) => row.record),
        next_cursor: more ? (rows.at(-1)?.seq ?? null) : null,
      };
    },

    async expire(now) {
      const cutoff = new Date(now.getTime() - options.retentionMs);
      // Keys go with their runs (ON DELETE CASCADE). Live runs (job set) always stay.
      await query(
        "forgetting expired runs",
        `DELETE FROM ${s}.upload_runs WHERE job IS NULL AND finished_at <= $1`,
        [cutoff],
      );
      await query(
        "forgetting runs beyond max_runs",
        `DELETE FROM ${s}.upload_runs WHERE run_id IN (
           SELECT run_id FROM ${s}.upload_runs WHERE job IS NULL ORDER BY seq DESC OFFSET $1)`,
        [options.maxRuns],
      );
    },

    async size() {
      const result = await query<{ count: string }>(
        "counting runs",
        `SELECT count(*) AS count FROM ${s}.upload_runs`,
      );
      return Number(result.rows[0]?.count ?? 0);
    },
  };
  return runs;
}
