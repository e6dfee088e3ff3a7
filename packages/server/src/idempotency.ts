import type { IncomingMessage } from "node:http";
import type {
  AcceptedUpload,
  IdempotencyScope,
  ManifestIdentity,
  UploadStore,
} from "@distributor/upload-store";
import type { RequestLog } from "./context.js";
import { HttpError } from "./http-error.js";

/** 1–255 visible ASCII characters (docs/integrations/http-upload.md). */
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

export function idempotencyKey(request: IncomingMessage): string | undefined {
  const value = request.headers["idempotency-key"];
  if (value === undefined) return undefined;
  if (typeof value !== "string" || !IDEMPOTENCY_KEY.test(value)) {
    throw new HttpError(
      400,
      "invalid_idempotency_key",
      "Idempotency-Key must be 1 to 255 visible ASCII characters",
    );
  }
  return value;
}

/**
 * Claims the key, waiting while another request stages with it; the accepted upload if any. An
 * upload accepted under another configuration of the pipeline (`configDigest`: another file
 * naming the same service opened the store, or the pipeline changed since) is refused rather than
 * replayed: its run published where that configuration said, not where this one does.
 */
export async function claim(
  store: UploadStore,
  scope: IdempotencyScope,
  configDigest: string,
): Promise<AcceptedUpload | undefined> {
  for (;;) {
    const claimed = await store.claimKey(scope);
    if (claimed.kind === "claimed") return undefined;
    if (claimed.kind === "accepted") {
      // Keys bound by an earlier version carry no digest: answered as before.
      if (claimed.configDigest !== undefined && claimed.configDigest !== configDigest) {
        throw new HttpError(
          409,
          "idempotency_key_other_config",
          `Idempotency-Key was already used for run ${claimed.accepted.run_id}, accepted under another configuration of pipeline ${scope.pipelineId} (another configuration file, or its source, validation or destinations changed since); that run's outcome says nothing about this configuration's destinations: upload with a new key`,
        );
      }
      return claimed.accepted;
    }
    await claimed.settled;
  }
}

/**
 * Checks that a retry holds the manifest of the upload accepted earlier under its key (409
 * otherwise); the caller then answers with that upload.
 */
export function replay(accepted: AcceptedUpload, manifest: ManifestIdentity, log: RequestLog) {
  log.run_id = accepted.run_id;
  const same =
    manifest.id === accepted.manifest.id &&
    manifest.digest === accepted.manifest.digest &&
    manifest.created === accepted.manifest.created;
  if (!same) {
    throw new HttpError(
      409,
      "idempotency_conflict",
      `Idempotency-Key was already used for run ${accepted.run_id} with manifest ${accepted.manifest.id} ${accepted.manifest.digest}; this upload holds ${manifest.id} ${manifest.digest}`,
    );
  }
  log.replayed = true;
}
