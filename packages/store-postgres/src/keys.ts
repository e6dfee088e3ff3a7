import type {
  AcceptedUpload,
  IdempotencyScope,
  KeyClaim,
  UploadStore,
} from "@distributor/upload-store";
import { POLL_MS, type StoreContext } from "./context.js";

export interface KeyClaims extends Pick<UploadStore, "claimKey" | "releaseKey"> {
  /** Wakes this process's requests waiting for the key (it was accepted or released). */
  settleLocal(scope: IdempotencyScope): void;
  /** Wakes every waiter (the store closes). */
  settleAll(): void;
  /** Releases again the keys whose release failed; stops at the first that fails again. */
  releaseLeftovers(): Promise<void>;
}

/** Idempotency keys: rows of `upload_keys`, claimed by an instance while it stages. */
export function createKeyClaims(ctx: StoreContext): KeyClaims {
  const { db, s, me, alive } = ctx;
  const { query, transaction } = db;
  /** Keys this process claimed and is staging with, with what settles their waiters. */
  const pending = new Map<string, () => void>();
  const pendingSettled = new Map<string, Promise<void>>();
  /**
   * Keys whose release failed (the database was away): until they are released, a request with
   * the key on another instance waits for this one, which is alive.
   */
  const unreleased = new Map<string, IdempotencyScope>();

  const keyOf = (scope: IdempotencyScope) =>
    JSON.stringify([scope.tokenId, scope.pipelineId, scope.key]);
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
      if (row === undefined || row.run_id !== null || !row.alive || ctx.isClosed()) return;
    }
  }

  const release = (scope: IdempotencyScope) =>
    query(
      "releasing an idempotency key",
      `DELETE FROM ${s}.upload_keys
       WHERE token_id = $1 AND pipeline_id = $2 AND key = $3 AND run_id IS NULL AND claimed_by = $4`,
      [scope.tokenId, scope.pipelineId, scope.key, me],
    );

  return {
    settleLocal,
    settleAll: () => {
      for (const settle of pending.values()) settle();
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
            config_digest: string | null;
            claimed_by: string | null;
            alive: boolean;
          }>(
            `SELECT accepted, config_digest, claimed_by, ${alive("k.claimed_by")} AS alive
             FROM ${s}.upload_keys k
             WHERE token_id = $1 AND pipeline_id = $2 AND key = $3 FOR UPDATE`,
            params,
          );
          const row = found.rows[0];
          if (row === undefined) return { kind: "again" as const };
          if (row.accepted !== null) {
            const accepted = row.accepted;
            return row.config_digest === null
              ? { kind: "accepted" as const, accepted }
              : { kind: "accepted" as const, accepted, configDigest: row.config_digest };
          }
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
      try {
        await release(scope);
      } catch (error) {
        unreleased.set(keyOf(scope), scope);
        throw error;
      } finally {
        // This process's waiters go on at once; its own next claim of the key takes it over.
        settleLocal(scope);
      }
    },

    async releaseLeftovers() {
      for (const [key, scope] of [...unreleased]) {
        await release(scope);
        unreleased.delete(key);
      }
    },
  };
}
