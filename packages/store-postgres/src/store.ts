import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { UploadStore } from "@distributor/upload-store";
import { UploadStoreError } from "@distributor/upload-store";
import type { StoreContext } from "./context.js";
import { openDatabase } from "./database.js";
import { aliveSql, startHeartbeat } from "./heartbeat.js";
import { createKeyClaims } from "./keys.js";
import type { PostgresUploadStoreOptions } from "./options.js";
import { createReadiness } from "./readiness.js";
import { createRunQueries } from "./runs.js";
import { checkSchemaName, migrate, quoted, ServiceMismatch } from "./schema.js";
import { sessionSettings } from "./session.js";
import { createRunWatch } from "./watch.js";

export type { PostgresUploadStoreOptions };

export const DEFAULT_CLAIM_TIMEOUT_MS = 60_000;
const DEFAULT_SCHEMA = "distributor";

/**
 * The upload store that several `serve` instances share (docs/integrations/http-upload.md, several instances): run
 * records, idempotency keys and the queue are rows in PostgreSQL. A worker claims a job with a
 * row update under its pipeline's transaction-scoped advisory lock, taken without waiting, so
 * each run executes on one instance at a time, a pipeline with a live claim is skipped by every
 * instance, and an instance that stalls while taking holds up that pipeline alone, until
 * PostgreSQL ends its session (session.ts). Claims belong to an
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
  const db = openDatabase(options, schema, sessionSettings(schema, me, claimTimeoutMs));
  const { pool, fail, checkout } = db;

  /** SQL: true when the instance named by `column` holds a claim that is still good. */
  const alive = aliveSql(s, claimTimeoutMs);

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

  let closed = false;
  const ctx: StoreContext = {
    options,
    db,
    schema,
    s,
    me,
    alive,
    isClosed: () => closed,
  };
  const watch = createRunWatch(ctx);
  const keys = createKeyClaims(ctx);
  const beat = await startHeartbeat(
    db,
    s,
    me,
    options.heartbeatIntervalMs ?? Math.max(25, Math.floor(claimTimeoutMs / 4)),
    () => keys.releaseLeftovers(),
  );
  const runs = createRunQueries(ctx, watch, keys);

  const store: UploadStore = {
    durable: true,
    pollIntervalMs: Math.max(50, Math.min(1000, Math.floor(claimTimeoutMs / 4))),
    recover: runs.recover,
    claimKey: keys.claimKey,
    releaseKey: keys.releaseKey,
    reserveQueueSlot: runs.reserveQueueSlot,
    releaseQueueSlot: runs.releaseQueueSlot,
    enqueue: runs.enqueue,
    takeNext: runs.takeNext,
    dequeue: runs.dequeue,
    queueLength: runs.queueLength,
    stagedBytes: runs.stagedBytes,
    getRun: runs.getRun,
    updateRun: runs.updateRun,
    requestCancel: runs.requestCancel,
    cancelRequests: runs.cancelRequests,
    watchRun: watch.watchRun,
    listRuns: runs.listRuns,
    expire: runs.expire,
    size: runs.size,
    readiness: createReadiness(ctx),

    async close() {
      if (closed) return;
      closed = true;
      clearInterval(beat);
      watch.stop();
      keys.settleAll();
      // Leaving: whatever this instance still held may be taken over at once.
      await pool
        .query(`DELETE FROM ${s}.upload_instances WHERE id = $1`, [me])
        .catch(() => undefined);
      await pool.end().catch(() => undefined);
    },
  };
  return store;
}
