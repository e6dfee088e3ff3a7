import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type {
  AcceptedUpload,
  IdempotencyScope,
  KeyClaim,
  StoreLimits,
  UploadJob,
  UploadRunRecord,
  UploadRunStatus,
  UploadStore,
} from "@distributor/server/store";
import { UploadStoreError } from "@distributor/server/store";
import pg from "pg";
import { checkSchemaName, migrate, quoted, ServiceMismatch } from "./schema.js";

export interface PostgresUploadStoreOptions extends StoreLimits {
  /** Connection URL, `postgres://user:password@host:port/database`. */
  url: string;
  /** Schema holding the store's tables, created when missing (default `distributor`). */
  schema?: string;
  /**
   * `server.store.claim_timeout`: an instance whose heartbeat is this old is taken for dead, and
   * another instance takes its runs over (default 60 s). Heartbeats come four times as often.
   */
  claimTimeoutMs?: number;
  /**
   * This instance's name in the store (default: host, process id and a random suffix). A process
   * restarted with the same name queues its own previous runs again at once instead of waiting
   * for the claim timeout; two live processes must never share one.
   */
  instanceId?: string;
  /**
   * How often this instance renews its heartbeat (default a quarter of the claim timeout). Tests
   * set it beyond their length to stand for a process that stalled.
   */
  heartbeatIntervalMs?: number;
  /** How long to wait for a connection (default 10 s) and for a query's answer (default 30 s). */
  connectTimeoutMs?: number;
  queryTimeoutMs?: number;
  /**
   * The service the store belongs to (`server.name`, or one derived from the configuration
   * file): recorded by the first instance, and a store recorded for another service is refused.
   */
  service?: string;
  /** Connections in the pool (default 4). */
  poolSize?: number;
}

export const DEFAULT_CLAIM_TIMEOUT_MS = 60_000;
const DEFAULT_SCHEMA = "distributor";
/** How often a request waiting for another instance's key, or a long-poll, looks again. */
const POLL_MS = 100;
/** Versions of runs this process last read, so a long-poll starts from what the caller saw. */
const SEEN_VERSIONS = 1_000;

const LIVE: readonly UploadRunStatus[] = ["accepted", "queued", "running"];
const isLive = (status: UploadRunStatus) => LIVE.includes(status);

/**
 * The upload store that several `serve` instances share (docs/integrations/http-upload.md, several instances): run
 * records, idempotency keys and the queue are rows in PostgreSQL. A worker claims a job with a
 * row update under a transaction-scoped advisory lock, so each run executes on one instance at a
 * time and a pipeline with a live claim is skipped by every instance. Claims belong to an
 * instance, and an instance is alive while its heartbeat is younger than the claim timeout: the
 * runs of one that died are taken over by the next `takeNext` anywhere. A change to a run by an
 * instance whose claim was taken over is ignored (its claim token no longer matches), and a
 * finished record is final. docs/decisions.md says why this is not pg-boss or graphile-worker.
 */
export async function openPostgresUploadStore(
  options: PostgresUploadStoreOptions,
): Promise<UploadStore> {
  const schema = options.schema ?? DEFAULT_SCHEMA;
  const problem = checkSchemaName(schema);
  if (problem !== undefined)
    throw new UploadStoreError("store_unusable", `upload store: ${problem}`);
  const claimTimeoutMs = options.claimTimeoutMs ?? DEFAULT_CLAIM_TIMEOUT_MS;
  const me = options.instanceId ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  const s = quoted(schema);
  // Bounded waits: a database that does not answer fails the call instead of holding it.
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.poolSize ?? 4,
    connectionTimeoutMillis: options.connectTimeoutMs ?? 10_000,
    query_timeout: options.queryTimeoutMs ?? 30_000,
    keepAlive: true,
  });
  // An idle connection that breaks is replaced by the pool; without a listener it would crash.
  pool.on("error", () => undefined);

  const fail = (operation: string, error: unknown): never => {
    if (error instanceof UploadStoreError) throw error;
    throw new UploadStoreError(
      "store_unavailable",
      `upload store (postgres, schema ${schema}): ${operation}: ${(error as Error).message}`,
      { cause: error },
    );
  };
  const query = async <R extends pg.QueryResultRow>(
    operation: string,
    sql: string,
    params: unknown[] = [],
  ): Promise<pg.QueryResult<R>> => {
    try {
      return await pool.query<R>(sql, params);
    } catch (error) {
      return fail(operation, error);
    }
  };
  /**
   * A connection of the pool, for the caller alone until `release`. The pool listens for errors
   * only on idle connections: one that breaks while checked out (the database restarted between
   * two statements) would emit an unhandled 'error' and end the process, so it gets a listener
   * of its own, and a connection that broke or whose rollback failed is discarded, not reused.
   */
  const checkout = async (): Promise<{
    client: pg.PoolClient;
    release: (discard?: boolean) => void;
  }> => {
    const client = await pool.connect();
    let broken = false;
    const onError = () => {
      broken = true;
    };
    client.on("error", onError);
    return {
      client,
      release: (discard = false) => {
        client.off("error", onError);
        client.release(discard || broken);
      },
    };
  };
  const transaction = async <T>(
    operation: string,
    work: (client: pg.PoolClient) => Promise<T>,
  ): Promise<T> => {
    let connection: Awaited<ReturnType<typeof checkout>>;
    try {
      connection = await checkout();
    } catch (error) {
      return fail(operation, error);
    }
    const { client } = connection;
    let discard = false;
    try {
      await client.query("BEGIN");
      const result = await work(client);
      await client.query("COMMIT");
      return result;
    } catch (error) {
      await client.query("ROLLBACK").catch(() => {
        discard = true;
      });
      return fail(operation, error);
    } finally {
      connection.release(discard);
    }
  };

  /** SQL: true when the instance named by `column` holds a claim that is still good. */
  const alive = (column: string) =>
    `EXISTS (SELECT 1 FROM ${s}.upload_instances i WHERE i.id = ${column} AND i.heartbeat_at > now() - interval '${Math.ceil(claimTimeoutMs)} milliseconds')`;

  try {
    const { client, release } = await checkout();
    try {
      await migrate(client, schema, options.service);
    } finally {
      release();
    }
  } catch (error) {
    await pool.end().catch(() => undefined);
    if (error instanceof ServiceMismatch) {
      throw new UploadStoreError("store_in_use", `upload store (postgres): ${error.message}`);
    }
    fail("preparing the schema", error);
  }

  const heartbeat = () =>
    query(
      "heartbeat",
      `INSERT INTO ${s}.upload_instances (id) VALUES ($1)
       ON CONFLICT (id) DO UPDATE SET heartbeat_at = now()`,
      [me],
    );
  await heartbeat().catch(async (error) => {
    await pool.end().catch(() => undefined);
    throw error;
  });
  let beating = false;
  const beat = setInterval(
    () => {
      if (beating) return;
      beating = true;
      void heartbeat()
        .catch(() => undefined)
        .finally(() => {
          beating = false;
        });
    },
    options.heartbeatIntervalMs ?? Math.max(25, Math.floor(claimTimeoutMs / 4)),
  );
  beat.unref();

  /** Claim tokens of the runs this instance took: its changes to them are fenced by these. */
  const claims = new Map<string, string>();
  /** Keys this process claimed and is staging with, with what settles their waiters. */
  const pending = new Map<string, () => void>();
  const pendingSettled = new Map<string, Promise<void>>();
  /** Long-polls: each watched run's waiters, with the version each waits to see change. */
  const watchers = new Map<string, Map<() => void, number | undefined>>();
  let looking: NodeJS.Timeout | undefined;
  const seen = new Map<string, number>();
  let reserved = 0;
  let closed = false;

  const keyOf = (scope: IdempotencyScope) =>
    JSON.stringify([scope.tokenId, scope.pipelineId, scope.key]);
  const remember = (runId: string, version: number) => {
    seen.delete(runId);
    seen.set(runId, version);
    if (seen.size > SEEN_VERSIONS) seen.delete(seen.keys().next().value as string);
  };
  const notify = (runId: string) => {
    const waiting = watchers.get(runId);
    if (waiting === undefined) return;
    watchers.delete(runId);
    for (const wake of [...waiting.keys()]) wake();
  };
  /**
   * Another instance's change arrives only through the table: one query per poll reads the
   * version of every watched run and wakes the waiters of those that changed (or went).
   */
  const lookForChanges = async () => {
    looking = undefined;
    const runIds = [...watchers.keys()];
    if (runIds.length === 0 || closed) return;
    try {
      const result = await pool.query<{ run_id: string; version: string }>(
        `SELECT run_id, version FROM ${s}.upload_runs WHERE run_id = ANY($1::text[])`,
        [runIds],
      );
      const versions = new Map(result.rows.map((row) => [row.run_id, Number(row.version)]));
      for (const runId of runIds) {
        const version = versions.get(runId) ?? -1;
        for (const [wake, baseline] of [...(watchers.get(runId) ?? [])]) {
          if (baseline === undefined) watchers.get(runId)?.set(wake, version);
          else if (baseline !== version) wake();
        }
      }
    } catch {
      // The next look, or each waiter's timeout, ends the wait.
    }
    scheduleLook();
  };
  const scheduleLook = () => {
    if (looking !== undefined || watchers.size === 0 || closed) return;
    looking = setTimeout(() => void lookForChanges(), POLL_MS);
    looking.unref();
  };
  const settleLocal = (scope: IdempotencyScope) => {
    const key = keyOf(scope);
    pending.get(key)?.();
    pending.delete(key);
    pendingSettled.delete(key);
  };
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  /** Resolves once another instance's pending key was released, accepted or abandoned. */
  async function keySettled(scope: IdempotencyScope): Promise<void> {
    for (;;) {
      await sleep(POLL_MS);
      const found = await query<{ run_id: string | null; alive: boolean }>(
        "waiting for an idempotency key",
        `SELECT run_id, ${alive("k.claimed_by")} AS alive FROM ${s}.upload_keys k
         WHERE token_id = $1 AND pipeline_id = $2 AND key = $3`,
        [scope.tokenId, scope.pipelineId, scope.key],
      );
      const row = found.rows[0];
      if (row === undefined || row.run_id !== null || !row.alive || closed) return;
    }
  }

  const jobOf = (value: unknown) => value as UploadJob;

  const store: UploadStore = {
    durable: true,
    pollIntervalMs: Math.max(50, Math.min(1000, Math.floor(claimTimeoutMs / 4))),

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

    async claimKey(scope): Promise<KeyClaim> {
      const key = keyOf(scope);
      for (;;) {
        const outcome = await transaction("claiming an idempotency key", async (client) => {
          const params = [scope.tokenId, scope.pipelineId, scope.key];
          const inserted = await client.query(
            `INSERT INTO ${s}.upload_keys (token_id, pipeline_id, key, claimed_by)
             VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`,
            [...params, me],
          );
          if (inserted.rowCount === 1) return { kind: "claimed" as const };
          const found = await client.query<{
            accepted: AcceptedUpload | null;
            claimed_by: string | null;
            alive: boolean;
          }>(
            `SELECT accepted, claimed_by, ${alive("k.claimed_by")} AS alive
             FROM ${s}.upload_keys k
             WHERE token_id = $1 AND pipeline_id = $2 AND key = $3 FOR UPDATE`,
            params,
          );
          const row = found.rows[0];
          if (row === undefined) return { kind: "again" as const };
          if (row.accepted !== null) return { kind: "accepted" as const, accepted: row.accepted };
          // Held by an instance that died, or by this one's previous life: take it.
          const ours = row.claimed_by === me && pending.has(key);
          if (!row.alive || (row.claimed_by === me && !ours)) {
            await client.query(
              `UPDATE ${s}.upload_keys SET claimed_by = $4
               WHERE token_id = $1 AND pipeline_id = $2 AND key = $3`,
              [...params, me],
            );
            return { kind: "claimed" as const };
          }
          return { kind: "pending" as const, local: ours };
        });
        if (outcome.kind === "again") continue;
        if (outcome.kind === "claimed") {
          let settle: () => void = () => undefined;
          const settled = new Promise<void>((resolve) => {
            settle = resolve;
          });
          pending.set(key, settle);
          pendingSettled.set(key, settled);
          return { kind: "claimed" };
        }
        if (outcome.kind === "accepted") return outcome;
        const local = outcome.local ? pendingSettled.get(key) : undefined;
        return { kind: "pending", settled: local ?? keySettled(scope) };
      }
    },

    async releaseKey(scope) {
      await query(
        "releasing an idempotency key",
        `DELETE FROM ${s}.upload_keys
         WHERE token_id = $1 AND pipeline_id = $2 AND key = $3 AND run_id IS NULL AND claimed_by = $4`,
        [scope.tokenId, scope.pipelineId, scope.key, me],
      );
      settleLocal(scope);
    },

    async reserveQueueSlot() {
      // Counted before the query, so two requests of this process cannot both take the last place.
      reserved += 1;
      try {
        const queued = await store.queueLength();
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
        const params = [scope.tokenId, scope.pipelineId, scope.key, record.run_id];
        const bound = await client.query(
          `UPDATE ${s}.upload_keys SET run_id = $4, accepted = $5, claimed_by = NULL
           WHERE token_id = $1 AND pipeline_id = $2 AND key = $3 AND run_id IS NULL
             AND (claimed_by = $6 OR claimed_by IS NULL)`,
          [...params, JSON.stringify(accepted), me],
        );
        if (bound.rowCount === 1) return;
        const inserted = await client.query(
          `INSERT INTO ${s}.upload_keys (token_id, pipeline_id, key, run_id, accepted)
           VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`,
          [...params, JSON.stringify(accepted)],
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
      for (;;) {
        const taken = await transaction("taking a queued run", async (client) => {
          // One taker at a time across instances: a pipeline's live claim is seen by the next.
          await client.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`${schema}:take`]);
          const found = await client.query<{ run_id: string; job: unknown }>(
            `SELECT r.run_id, r.job FROM ${s}.upload_runs r
             WHERE r.job IS NOT NULL
               AND NOT ${alive("r.claimed_by")}
               AND NOT (r.pipeline_id = ANY($1::text[]))
               AND NOT EXISTS (
                 SELECT 1 FROM ${s}.upload_runs o
                 WHERE o.pipeline_id = r.pipeline_id AND o.job IS NOT NULL
                   AND o.run_id <> r.run_id AND ${alive("o.claimed_by")})
             ORDER BY r.seq LIMIT 1`,
            [[...busyPipelines]],
          );
          const row = found.rows[0];
          if (row === undefined) return null;
          const token = randomUUID();
          const claimed = await client.query(
            `UPDATE ${s}.upload_runs SET claimed_by = $2, claim_token = $3, version = version + 1
             WHERE run_id = $1 AND job IS NOT NULL AND NOT ${alive("claimed_by")}`,
            [row.run_id, me, token],
          );
          if (claimed.rowCount !== 1) return "again" as const;
          return { runId: row.run_id, token, job: jobOf(row.job) };
        });
        if (taken === "again") continue;
        if (taken === null) return undefined;
        claims.set(taken.runId, taken.token);
        return taken.job;
      }
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

    watchRun(runId, timeoutMs, signal) {
      return new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          signal?.removeEventListener("abort", done);
          const waiting = watchers.get(runId);
          waiting?.delete(done);
          if (waiting?.size === 0) watchers.delete(runId);
          resolve();
        };
        const timer = setTimeout(done, timeoutMs);
        signal?.addEventListener("abort", done, { once: true });
        let waiting = watchers.get(runId);
        if (waiting === undefined) {
          waiting = new Map();
          watchers.set(runId, waiting);
        }
        // From the version this process last read: a change since the caller's read counts.
        waiting.set(done, seen.get(runId));
        scheduleLook();
      });
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

    async close() {
      if (closed) return;
      closed = true;
      clearInterval(beat);
      clearTimeout(looking);
      for (const settle of pending.values()) settle();
      // Leaving: whatever this instance still held may be taken over at once.
      await pool
        .query(`DELETE FROM ${s}.upload_instances WHERE id = $1`, [me])
        .catch(() => undefined);
      await pool.end().catch(() => undefined);
    },
  };
  return store;
}
