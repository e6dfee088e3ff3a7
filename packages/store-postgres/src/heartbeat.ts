import type { Database } from "./database.js";

/** SQL that is true when the instance named by a column holds a claim that is still good. */
export function aliveSql(s: string, claimTimeoutMs: number): (column: string) => string {
  return (column: string) =>
    `EXISTS (SELECT 1 FROM ${s}.upload_instances i WHERE i.id = ${column} AND i.heartbeat_at > now() - interval '${Math.ceil(claimTimeoutMs)} milliseconds')`;
}

/**
 * Records this instance as alive, failing (and ending the pool) when it cannot, then renews the
 * heartbeat every `intervalMs`, calling `afterBeat` after each renewal that succeeded; the timer
 * is the caller's to clear.
 */
export async function startHeartbeat(
  db: Database,
  s: string,
  me: string,
  intervalMs: number,
  afterBeat: () => Promise<void>,
): Promise<NodeJS.Timeout> {
  const { pool, query } = db;
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
  const beat = setInterval(() => {
    if (beating) return;
    beating = true;
    void heartbeat()
      .then(afterBeat)
      .catch(() => undefined)
      .finally(() => {
        beating = false;
      });
  }, intervalMs);
  beat.unref();
  return beat;
}
