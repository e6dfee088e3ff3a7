import { UploadStoreError } from "@distributor/upload-store";
import pg from "pg";
import { isUnavailable } from "./errors.js";
import type { PostgresUploadStoreOptions } from "./options.js";
import type { sessionSettings } from "./session.js";

/** The pool and the bounded, error-mapped ways the store talks through it. */
export interface Database {
  readonly pool: pg.Pool;
  /**
   * Throws the failure as the store's error, naming the operation: `store_unavailable` when the
   * database cannot be reached or is blocked for now, `store_failed` for any other fault.
   */
  fail(operation: string, error: unknown): never;
  query<R extends pg.QueryResultRow>(
    operation: string,
    sql: string,
    params?: unknown[],
  ): Promise<pg.QueryResult<R>>;
  checkout(): Promise<{ client: pg.PoolClient; release: (discard?: boolean) => void }>;
  transaction<T>(operation: string, work: (client: pg.PoolClient) => Promise<T>): Promise<T>;
}

export function openDatabase(
  options: PostgresUploadStoreOptions,
  schema: string,
  session: ReturnType<typeof sessionSettings>,
): Database {
  // Bounded waits: a database that does not answer fails the call instead of holding it, and the
  // server ends a session of this store that stalls inside a transaction (session.ts).
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.poolSize ?? 4,
    connectionTimeoutMillis: options.connectTimeoutMs ?? 10_000,
    query_timeout: options.queryTimeoutMs ?? 30_000,
    keepAlive: true,
    ...session,
  });
  // An idle connection that breaks is replaced by the pool; without a listener it would crash.
  pool.on("error", () => undefined);

  const fail = (operation: string, error: unknown): never => {
    if (error instanceof UploadStoreError) throw error;
    throw new UploadStoreError(
      isUnavailable(error) ? "store_unavailable" : "store_failed",
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
  return { pool, fail, query, checkout, transaction };
}
