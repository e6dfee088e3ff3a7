import { constants } from "node:fs";
import { access } from "node:fs/promises";
import type { StagingArea } from "./staging/staging-area.js";
import type { UploadStore } from "./store/store.js";

/** What `GET /readyz` checked: `ok`, or why not. */
export interface ReadinessChecks {
  store: string;
  staging: string;
}

/**
 * Whether the server can accept an upload now: its store answers (a read of the queue) and its
 * staging directory is there and writable. `/healthz` only says the process answers; a load
 * balancer should route by this one.
 */
export async function readiness(
  store: UploadStore,
  staging: StagingArea,
): Promise<ReadinessChecks> {
  const [storeCheck, stagingCheck] = await Promise.all([
    store.queueLength().then(
      () => "ok",
      (error: unknown) => `the store does not answer: ${(error as Error)?.message ?? error}`,
    ),
    access(staging.receiveRoot, constants.W_OK).then(
      () => "ok",
      (error: unknown) =>
        `the staging directory ${staging.receiveRoot} is not writable: ${(error as NodeJS.ErrnoException)?.code ?? error}`,
    ),
  ]);
  return { store: storeCheck, staging: stagingCheck };
}
