import type pg from "pg";

/** The store's schema version; a database with a later one is refused, not altered. */
export const SCHEMA_VERSION = 1;
const FORMAT = "distributor-upload-store";

/** `"name"` for SQL; names are checked by `checkSchemaName` first. */
export const quoted = (name: string) => `"${name}"`;

export function checkSchemaName(name: string): string | undefined {
  return /^[a-z_][a-z0-9_]{0,62}$/.test(name)
    ? undefined
    : `schema ${JSON.stringify(name)} must be a lower-case SQL name (letters, digits and _)`;
}

/**
 * Creates the store's tables when missing, under a transaction-scoped advisory lock so that
 * instances starting together do not race, and checks the recorded schema version.
 *
 * - `upload_instances`: every running `serve`, with its last heartbeat; a claim by an instance
 *   whose heartbeat is older than the claim timeout is void.
 * - `upload_runs`: one row per run; `job` is set exactly while the run is live (accepted, queued,
 *   running); `claimed_by`/`claim_token` name the instance executing it and fence its changes.
 * - `upload_keys`: idempotency keys; `run_id` null while a request stages with the key;
 *   `config_digest` the pipeline configuration that accepted the upload.
 * - `upload_store_meta.service`: the service the store belongs to (see `ServiceMismatch`).
 */
export async function migrate(
  client: pg.ClientBase,
  schema: string,
  service?: string,
): Promise<void> {
  const s = quoted(schema);
  await client.query("BEGIN");
  try {
    await client.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`${FORMAT}:${schema}`]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${s}`);
    await client.query(`CREATE TABLE IF NOT EXISTS ${s}.upload_store_meta (
      format text PRIMARY KEY,
      version integer NOT NULL
    )`);
    const found = await client.query<{ version: number }>(
      `SELECT version FROM ${s}.upload_store_meta WHERE format = $1`,
      [FORMAT],
    );
    const version = found.rows[0]?.version;
    if (version !== undefined && version !== SCHEMA_VERSION) {
      throw new Error(
        `schema ${schema} holds upload store version ${version}; this distributor knows version ${SCHEMA_VERSION} (upgrade distributor, or use another server.store schema)`,
      );
    }
    await client.query(`CREATE TABLE IF NOT EXISTS ${s}.upload_instances (
      id text PRIMARY KEY,
      started_at timestamptz NOT NULL DEFAULT now(),
      heartbeat_at timestamptz NOT NULL DEFAULT now()
    )`);
    await client.query(`CREATE TABLE IF NOT EXISTS ${s}.upload_runs (
      seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
      run_id text PRIMARY KEY,
      token_id text NOT NULL,
      pipeline_id text NOT NULL,
      status text NOT NULL,
      finished_at timestamptz,
      record jsonb NOT NULL,
      job jsonb,
      claimed_by text,
      claim_token uuid,
      cancel_reason text,
      version bigint NOT NULL DEFAULT 1
    )`);
    await client.query(
      `CREATE INDEX IF NOT EXISTS upload_runs_live ON ${s}.upload_runs (seq) WHERE job IS NOT NULL`,
    );
    await client.query(
      `CREATE INDEX IF NOT EXISTS upload_runs_finished ON ${s}.upload_runs (seq) WHERE job IS NULL`,
    );
    await client.query(
      `CREATE INDEX IF NOT EXISTS upload_runs_token ON ${s}.upload_runs (token_id, seq)`,
    );
    await client.query(`CREATE TABLE IF NOT EXISTS ${s}.upload_keys (
      token_id text NOT NULL,
      pipeline_id text NOT NULL,
      key text NOT NULL,
      run_id text REFERENCES ${s}.upload_runs (run_id) ON DELETE CASCADE,
      accepted jsonb,
      claimed_by text,
      PRIMARY KEY (token_id, pipeline_id, key)
    )`);
    await client.query(`CREATE INDEX IF NOT EXISTS upload_keys_run ON ${s}.upload_keys (run_id)`);
    // The pipeline configuration that accepted a key's upload (same schema version: null in keys
    // bound before the column existed).
    await client.query(`ALTER TABLE ${s}.upload_keys ADD COLUMN IF NOT EXISTS config_digest text`);
    if (version === undefined) {
      await client.query(`INSERT INTO ${s}.upload_store_meta (format, version) VALUES ($1, $2)`, [
        FORMAT,
        SCHEMA_VERSION,
      ]);
    }
    // The service the store belongs to: set by the first instance that names one, then checked.
    await client.query(`ALTER TABLE ${s}.upload_store_meta ADD COLUMN IF NOT EXISTS service text`);
    if (service !== undefined) {
      await client.query(
        `UPDATE ${s}.upload_store_meta SET service = $2 WHERE format = $1 AND service IS NULL`,
        [FORMAT, service],
      );
      const owner = await client.query<{ service: string | null }>(
        `SELECT service FROM ${s}.upload_store_meta WHERE format = $1`,
        [FORMAT],
      );
      const recorded = owner.rows[0]?.service;
      if (recorded !== undefined && recorded !== null && recorded !== service) {
        throw new ServiceMismatch(
          `schema ${schema} belongs to service ${JSON.stringify(recorded)}, not ${JSON.stringify(service)} (this configuration's server.name, or its file); give this configuration a schema of its own, or set server.name: ${JSON.stringify(recorded)} if it is the same service`,
        );
      }
    }
    await client.query("COMMIT");
  } catch (error) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw error;
  }
}

/** The store belongs to another service: refused, never altered. */
export class ServiceMismatch extends Error {
  override name = "ServiceMismatch";
}
