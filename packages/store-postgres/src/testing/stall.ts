import pg from "pg";
import { sessionSettings, takeLockKeys } from "../session.js";

/** A session of the store that stalled while it was taking a run (see `stallWhileTaking`). */
export interface StalledTake {
  /** The session's process id on the server, as `pg_stat_activity` and `/readyz` name it. */
  pid: number;
  /** Resolves with the server's reason once PostgreSQL ended the session. */
  ended: Promise<string>;
  /** Ends the transaction and the session, if the server has not. */
  release(): Promise<void>;
}

/**
 * Opens a session exactly as an instance of the store in `schema` does (its settings and name),
 * takes the lock for taking runs of `pipelineId` inside a transaction and then does nothing:
 * what PostgreSQL sees of a `serve` stopped (SIGSTOP) in the middle of taking a run.
 */
export async function stallWhileTaking(
  url: string,
  options: { schema?: string; pipelineId: string; claimTimeoutMs: number },
): Promise<StalledTake> {
  const schema = options.schema ?? "distributor";
  const client = new pg.Client({
    connectionString: url,
    ...sessionSettings(schema, "stalled-while-taking", options.claimTimeoutMs),
  });
  let open = true;
  const ended = new Promise<string>((resolve) => {
    client.on("error", (error) => {
      open = false;
      resolve(error.message);
    });
    client.on("end", () => {
      open = false;
      resolve("the session ended");
    });
  });
  await client.connect();
  await client.query("BEGIN");
  const [first, second] = takeLockKeys(schema, options.pipelineId);
  await client.query("SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))", [first, second]);
  const pid = await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
  return {
    pid: pid.rows[0]?.pid ?? 0,
    ended,
    async release() {
      if (open) await client.query("ROLLBACK").catch(() => undefined);
      await client.end().catch(() => undefined);
    },
  };
}
