import type { StagingArea } from "../staging/staging-area.js";
import { directoryPartialStore } from "./directory-store.js";
import type { PartialStore } from "./partial-store.js";

/** Partials live in the staging directory (this instance's, or the shared one). */
export function openPartialStore(stagingArea: StagingArea, ttlMs: number): PartialStore {
  return directoryPartialStore(stagingArea.receiveRoot, ttlMs);
}
