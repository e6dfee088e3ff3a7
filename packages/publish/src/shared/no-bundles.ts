import { stat } from "node:fs/promises";
import type { StorageBackend } from "@distributor/storage";
import type { PipelineConfig } from "../config/types.js";
import { WorkflowError } from "../errors.js";

/**
 * The failure of a pipeline whose source holds no bundle. A local backend reads a root that does
 * not exist as empty, so "no manifest.json anywhere" would also be said of a mistyped or
 * unmounted path; for a local source the directory is looked at first, and a missing one is
 * `source_not_found`, naming the path. Any other source stays `no_bundles`.
 */
export async function noBundlesError(
  pipeline: PipelineConfig,
  source: StorageBackend,
): Promise<WorkflowError> {
  if (pipeline.source.backend === "local") {
    const path = pipeline.source.path;
    // A path that is a file fails the walk itself (`storage_conflict`), before this is asked.
    const missing = await stat(path).then(
      () => false,
      (error: NodeJS.ErrnoException) => error.code === "ENOENT" || error.code === "ENOTDIR",
    );
    if (missing) {
      return new WorkflowError("source_not_found", `source directory ${path} does not exist`);
    }
  }
  return new WorkflowError(
    "no_bundles",
    `no bundles found in source ${source.location} (no directory holds a manifest.json)`,
  );
}
