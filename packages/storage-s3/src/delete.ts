import { DeleteObjectsCommand, type S3Client } from "@aws-sdk/client-s3";
import type { StorageOperation } from "@distributor/storage";
import { describeFailure, kindOf, s3Error } from "./errors.js";

/** DeleteObjects accepts at most this many keys per request. */
export const DELETE_BATCH = 1000;

/**
 * Deletes keys in requests of at most 1 000. Keys the service refuses are reported together (up to
 * ten shown), and no further batch is sent after a refusal.
 */
export async function deleteKeys(
  client: S3Client,
  bucket: string,
  keys: readonly string[],
  operation: StorageOperation,
  path: string,
  signal: AbortSignal | undefined,
): Promise<void> {
  for (let start = 0; start < keys.length; start += DELETE_BATCH) {
    const batch = keys.slice(start, start + DELETE_BATCH);
    const response = await client.send(
      new DeleteObjectsCommand({
        Bucket: bucket,
        Delete: { Objects: batch.map((Key) => ({ Key })), Quiet: true },
      }),
      { abortSignal: signal },
    );
    const errors = response.Errors ?? [];
    if (errors.length === 0) continue;
    const failures = errors.map((error) => ({
      key: error.Key ?? "?",
      failure: { code: error.Code ?? "Error", status: undefined, message: error.Message ?? "" },
    }));
    const first = failures[0] as (typeof failures)[number];
    const kind = kindOf(first.failure);
    const shown = failures
      .slice(0, 10)
      .map(({ key, failure }) => describeFailure(failure, kindOf(failure), { bucket, key }))
      .join("; ");
    const more = failures.length > 10 ? `; and ${failures.length - 10} more` : "";
    throw s3Error(
      kind,
      operation,
      path,
      `${failures.length} of ${batch.length} keys were not deleted: ${shown}${more}`,
    );
  }
}
