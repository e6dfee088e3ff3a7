import type { StoreContext } from "./context.js";
import { applicationPrefix, takeLockKeys } from "./session.js";

/** A lock held, or waited for, this long is a stall: taking a run lasts milliseconds. */
export const BLOCKED_AFTER_MS = 1_000;

interface Blocker {
  pid: number;
  application_name: string | null;
  state: string | null;
  held_ms: string;
  pipeline_id: string | null;
  blocking: number[] | null;
}

/**
 * `UploadStore.readiness`: `ok` when the database answers and nothing blocks the store; else
 * each session that blocks it: one that has held a pipeline's take lock for a second or more
 * (an instance stalled while taking a run, or any other client holding it), and any session of
 * the store's instances that has waited as long for a lock. Sessions are visible to the store's
 * database user when they are its own, or with `pg_read_all_stats`.
 */
export function createReadiness(ctx: StoreContext): () => Promise<string> {
  const { db, schema, s } = ctx;
  return async () => {
    const found = await db.query<Blocker>(
      "checking for stalled sessions",
      `SELECT a.pid, a.application_name, a.state,
              floor(extract(epoch FROM now() - a.xact_start) * 1000)::bigint AS held_ms,
              p.pipeline_id, NULL::int[] AS blocking
       FROM pg_locks l
       JOIN pg_stat_activity a ON a.pid = l.pid
       LEFT JOIN (SELECT DISTINCT pipeline_id FROM ${s}.upload_runs WHERE job IS NOT NULL) p
         ON l.objid = hashtext(p.pipeline_id)::oid
       WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
         AND l.classid = hashtext($1)::oid
         AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
         AND a.xact_start < now() - $3 * interval '1 millisecond'
       UNION ALL
       SELECT a.pid, a.application_name, a.state,
              floor(extract(epoch FROM now() - a.state_change) * 1000)::bigint,
              NULL, pg_blocking_pids(a.pid)
       FROM pg_stat_activity a
       WHERE left(a.application_name, length($2)) = $2 AND a.wait_event_type = 'Lock'
         AND a.state_change < now() - $3 * interval '1 millisecond'`,
      [takeLockKeys(schema, "")[0], applicationPrefix(schema), BLOCKED_AFTER_MS],
    );
    if (found.rows.length === 0) return "ok";
    return `blocked: ${found.rows.map(describe).join("; ")}`;
  };
}

function describe(blocker: Blocker): string {
  const who = `PostgreSQL session ${blocker.pid} (${blocker.application_name || "application unnamed"}${blocker.state ? `, ${blocker.state}` : ""})`;
  const seconds = (Number(blocker.held_ms) / 1000).toFixed(1);
  if (blocker.blocking !== null) {
    return `${who} has waited ${seconds}s for a lock held by session ${blocker.blocking.join(", ")}`;
  }
  const pipeline = blocker.pipeline_id === null ? "a pipeline" : `pipeline ${blocker.pipeline_id}`;
  return `${who} has held the lock for taking runs of ${pipeline} for ${seconds}s; no instance takes its runs until the session ends`;
}
