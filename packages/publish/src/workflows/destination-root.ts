import { type OwnerScope, type StateDocument, serializeDocument } from "@distributor/state";
import { isStorageError, STATE_FILE_NAME, type StorageBackend } from "@distributor/storage";
import type { DestinationConfig } from "../config/types.js";
import { readStateFile } from "../publish/state-file.js";
import { WorkflowError } from "./shared.js";

/**
 * The configured root of a destination as reports show it (`root_path`): the local or SSH
 * directory, or the S3 prefix; `.` when the root is the backend's own root.
 */
export function destinationRootPath(destination: DestinationConfig): string {
  const location = destination.location;
  const root = location.backend === "s3" ? location.prefix : location.path;
  return root === "" ? "." : root;
}

/** An owner scope as maintenance reports print it. */
export function scopeReport(scope: OwnerScope): { pipeline_id: string; destination_id: string } {
  return { pipeline_id: scope.pipelineId, destination_id: scope.destinationId };
}

/**
 * Reads and parses the `.distributor.json` at the root of a destination. A missing file fails
 * with `state_not_found` (there is nothing managed to maintain), unparseable text with
 * `state_invalid`; the file itself is never touched.
 */
export async function readRootState(
  backend: StorageBackend,
  signal: AbortSignal | undefined,
): Promise<StateDocument> {
  try {
    return (await readStateFile(backend, STATE_FILE_NAME, signal)).document;
  } catch (error) {
    if (isStorageError(error, "not_found")) {
      throw new WorkflowError(
        "state_not_found",
        `${backend.location}: no ${STATE_FILE_NAME} at the destination root, so nothing is managed there`,
        { cause: error },
      );
    }
    throw error;
  }
}

/**
 * Replaces the root `.distributor.json` with `document` (atomic write). Serialising validates, so
 * invalid state is refused before anything is written.
 */
export async function writeRootState(
  backend: StorageBackend,
  document: StateDocument,
  signal: AbortSignal | undefined,
): Promise<void> {
  const text = serializeDocument(document);
  await backend.writeFile(STATE_FILE_NAME, text, { overwrite: true, signal });
}
