import { createHash } from "node:crypto";
import type { ServerResponse } from "node:http";
import { Readable } from "node:stream";
import { RETRY_AFTER_SECONDS, type RequestLog, type ServerContext } from "../context.js";
import { HttpError } from "../http-error.js";
import {
  completionScope,
  type Partial,
  type PartialArchive,
  PartialUnreadableError,
} from "../resumable/partial-store.js";
import { tusHeaders } from "../resumable/tus.js";
import { uploadHeaders } from "./resumable-partial.js";
import { acceptArchive, sendAccepted, type UploadPipeline } from "./upload.js";

// The PATCH that completes a resumable upload hands the archive to `acceptArchive`, the
// single-request upload's own path (docs/design/upload-service.md, "Resumable uploads").

/** Refusals of the archive's content: sending the same bytes again cannot mend them. */
const CONTENT_REFUSALS: ReadonlySet<number> = new Set([413, 422, 460]);

/**
 * Hands the completed archive to the single-request upload's path under the partial's
 * idempotency scope (the producer's key, or one of the partial's own), so that a second
 * completion of it (a resume on another instance, a repeated last PATCH) is a replay, answered
 * without reading the bytes again when the partial recorded that acceptance. A refusal of the
 * content removes the partial; one a retry mends (a full queue, a store that is away, bytes that
 * could not be read back: 503) keeps it for the producer's next PATCH.
 */
export async function complete(
  ctx: ServerContext,
  response: ServerResponse,
  upload: {
    token: Parameters<typeof acceptArchive>[1]["token"];
    pipeline: UploadPipeline;
    partial: Partial;
    location: string;
    log: RequestLog;
  },
) {
  const { partial, location } = upload;
  const { partials } = ctx.resumable;
  const id = partial.info.id;
  const archive = partials.archive(partial);
  let unreadable: PartialUnreadableError | undefined;
  const watched = async function* () {
    try {
      yield* archive;
    } catch (error) {
      if (error instanceof PartialUnreadableError) unreadable = error;
      throw error;
    }
  };
  try {
    const { accepted, replayed } = await acceptArchive(ctx, {
      token: upload.token,
      pipeline: upload.pipeline,
      key: completionScope(partial.info).key,
      body: Readable.from(watched(), { objectMode: false }),
      contentType: partial.info.contentType,
      log: upload.log,
      knownReplay: async (earlier) =>
        (await partials.read(id))?.accepted?.run_id === earlier.run_id,
      check: () => checkSha256(archive, partial),
    });
    await partials.markAccepted(partial, accepted);
    sendAccepted(
      response,
      accepted,
      replayed,
      uploadHeaders({ ...partial, offset: partial.info.length, accepted }, location),
    );
  } catch (error) {
    if (unreadable !== undefined || error instanceof PartialUnreadableError) {
      const cause = unreadable ?? (error as PartialUnreadableError);
      throw new HttpError(
        503,
        "partial_unreadable",
        `the upload's bytes could not be read back from staging (${cause.message}); it is kept: send the last PATCH again (Upload-Offset ${partial.info.length}, empty body) shortly`,
        { headers: tusHeaders({ "Retry-After": RETRY_AFTER_SECONDS }), cause },
      );
    }
    if (error instanceof HttpError && refusesContent(error)) {
      // Never remove what another completion accepted meanwhile.
      if ((await partials.read(id).catch(() => undefined))?.accepted === undefined) {
        await partials.remove(id);
      }
    }
    throw error;
  }
}

function refusesContent(error: HttpError): boolean {
  if (error.status === 409) return error.code === "idempotency_conflict";
  return CONTENT_REFUSALS.has(error.status);
}

async function checkSha256(archive: PartialArchive, partial: Partial): Promise<void> {
  if (partial.info.sha256 === null) return;
  const hash = createHash("sha256");
  for await (const chunk of archive) hash.update(chunk);
  const digest = hash.digest("hex");
  if (digest !== partial.info.sha256) {
    throw new HttpError(
      460,
      "checksum_mismatch",
      `the ${partial.info.length} bytes received have sha256 ${digest}, not the ${partial.info.sha256} declared at creation; the upload was removed: start over`,
      { headers: tusHeaders() },
    );
  }
}
