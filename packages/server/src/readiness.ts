import { constants } from "node:fs";
import { access } from "node:fs/promises";
import type { UploadStore } from "@distributor/upload-store";
import type { StagingArea } from "./staging/staging-area.js";

/** What `GET /readyz` checked: `ok`, or why not. */
export interface ReadinessChecks {
  store: string;
  staging: string;
  /** Present while the server shuts down: it takes no new work. */
  shutdown?: string;
}

/**
 * How long `/readyz` waits for each check: a store that does not answer within it is reported,
 * not waited for past the probe's own timeout (connecting alone may take 10 s).
 */
export const READINESS_TIMEOUT_MS = 2_000;

/**
 * Whether the server can accept an upload now: its store answers and is not blocked (its own
 * `readiness`, else a read of the queue) and its staging directory is there and writable, each within `READINESS_TIMEOUT_MS`. `/healthz` only
 * says the process answers; a load balancer should route by this one.
 */
export async function readiness(
  store: UploadStore,
  staging: StagingArea,
  timeoutMs = READINESS_TIMEOUT_MS,
): Promise<ReadinessChecks> {
  const [storeCheck, stagingCheck] = await Promise.all([
    within(
      timeoutMs,
      (store.readiness?.() ?? store.queueLength().then(() => "ok")).then(
        (check) => check,
        (error: unknown) => `the store does not answer: ${(error as Error)?.message ?? error}`,
      ),
      `the store did not answer within ${timeoutMs / 1000}s`,
    ),
    within(
      timeoutMs,
      access(staging.receiveRoot, constants.W_OK).then(
        () => "ok",
        (error: unknown) =>
          `the staging directory ${staging.receiveRoot} is not writable: ${(error as NodeJS.ErrnoException)?.code ?? error}`,
      ),
      `the staging directory ${staging.receiveRoot} did not answer within ${timeoutMs / 1000}s`,
    ),
  ]);
  return { store: storeCheck, staging: stagingCheck };
}

/** The check's answer, or `late` once `ms` have passed without one. */
function within(ms: number, check: Promise<string>, late: string): Promise<string> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<string>((resolve) => {
    timer = setTimeout(resolve, ms, late);
  });
  return Promise.race([check, timeout]).finally(() => clearTimeout(timer));
}
