import type { StagingArea } from "../staging/staging-area.js";
import { directoryPartialStore } from "./directory-store.js";
import type { PartialStore } from "./partial-store.js";
import { s3PartialStore } from "./s3-store.js";

/**
 * Partials live where accepted bundles wait: in the S3 staging prefix when there is one, so that
 * any instance continues them; else in the staging directory (this instance's, or the shared one).
 */
export function openPartialStore(stagingArea: StagingArea, ttlMs: number): PartialStore {
  return stagingArea.remoteRoot === undefined
    ? directoryPartialStore(stagingArea.receiveRoot, ttlMs)
    : s3PartialStore(stagingArea.remoteRoot, ttlMs);
}
