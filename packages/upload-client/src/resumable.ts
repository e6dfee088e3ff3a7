import { createHash } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { BUNDLE_ARCHIVE_CONTENT_TYPE } from "@distributor/bundle";
import { UploadError } from "./errors.js";
import type { ClientTimeouts, UploadProgress } from "./options.js";
import {
  createDeadline,
  invalidResponse,
  pacedBody,
  readBody,
  refusal,
  type Transport,
} from "./transport.js";
import { type AcceptedBody, AcceptedBodySchema, parseWire } from "./wire.js";

// The producer's side of tus 1.0 (docs/integrations/http-upload.md, "Resumable uploads"): the
// archive is packed once into a file, then created on the server under the idempotency key and
// sent from whatever offset the server says it durably holds. The server derives the upload from
// the key, so a producer that restarted with the same key and bundle (packing is deterministic)
// finds its upload again.

const TUS = { "tus-resumable": "1.0.0" };

/** A packed archive on disk, with what creation declares of it. */
export interface PackedArchive {
  path: string;
  size: number;
  /** Hex SHA-256 of the archive: the server checks the completed upload against it. */
  sha256: string;
  remove(): Promise<void>;
}

/** Writes the packed stream to a private temporary file, hashing it on the way. */
export async function packToFile(stream: AsyncIterable<Uint8Array>): Promise<PackedArchive> {
  const directory = await mkdtemp(join(tmpdir(), "distributor-upload-"));
  const path = join(directory, "bundle.tar.gz");
  const hash = createHash("sha256");
  try {
    await pipeline(
      Readable.from(stream),
      async function* (source: AsyncIterable<Buffer>) {
        for await (const chunk of source) {
          hash.update(chunk);
          yield chunk;
        }
      },
      createWriteStream(path, { mode: 0o600 }),
    );
  } catch (error) {
    await rm(directory, { recursive: true, force: true });
    throw error;
  }
  return {
    path,
    size: (await stat(path)).size,
    sha256: hash.digest("hex"),
    remove: () => rm(directory, { recursive: true, force: true }),
  };
}

/** What one attempt of a resumable upload needs; `location` survives between attempts. */
export interface ResumableUpload {
  transport: Transport;
  timeouts: ClientTimeouts;
  /** `POST` target: `…/pipelines/{id}/uploads`. */
  createUrl: string;
  server: URL;
  archive: PackedArchive;
  idempotencyKey: string;
  operation: string;
  signal: AbortSignal | undefined;
  onProgress: ((progress: UploadProgress) => void) | undefined;
  /** The upload's URL once created (kept across attempts). */
  location?: string | undefined;
}

/** The answer that accepted the upload, or `unsupported` from a server that does not speak tus. */
export type AttemptResult = { response: Response; accepted: AcceptedBody } | "unsupported";

/**
 * One attempt: create (or find) the upload, ask what the server holds, send the rest. A broken
 * connection or a retryable refusal throws a retryable `UploadError`; the next attempt resumes.
 */
export async function resumableAttempt(upload: ResumableUpload): Promise<AttemptResult> {
  const { archive } = upload;
  let offset: number;
  if (upload.location === undefined) {
    const created = await create(upload);
    if (created === "unsupported" || "accepted" in created) return created;
    upload.location = created.location;
    offset = created.offset;
  } else {
    const held = await head(upload, upload.location);
    if (held === undefined) {
      // Expired or terminated: start over under the same key.
      upload.location = undefined;
      return resumableAttempt(upload);
    }
    offset = held;
  }
  upload.onProgress?.({ offset, total: archive.size, resumed: offset > 0 });
  return send(upload, upload.location, offset);
}

async function create(
  upload: ResumableUpload,
): Promise<{ location: string; offset: number } | AttemptResult> {
  const { archive, transport, signal } = upload;
  const response = await transport.send(
    upload.createUrl,
    {
      method: "POST",
      headers: transport.headers({
        ...TUS,
        "idempotency-key": upload.idempotencyKey,
        "upload-length": String(archive.size),
        "upload-metadata": `filetype ${base64(BUNDLE_ARCHIVE_CONTENT_TYPE)},sha256 ${base64(archive.sha256)}`,
      }),
      ...(signal === undefined ? {} : { signal }),
    },
    upload.operation,
  );
  if (response.headers.get("tus-resumable") === null) {
    // A server before resumable uploads refuses a creation (a POST without an archive) for its
    // missing Content-Type; any other refusal applies to a single-request upload as well.
    if (response.status !== 415) throw await refusal(response, upload.operation);
    await response.body?.cancel().catch(() => undefined);
    return "unsupported";
  }
  if (response.status === 200) return accepted(upload, response);
  if (response.status !== 201) throw await refusal(response, upload.operation);
  await response.body?.cancel().catch(() => undefined);
  const location = response.headers.get("location");
  const offset = Number(response.headers.get("upload-offset") ?? "0");
  if (location === null || !Number.isSafeInteger(offset) || offset < 0) {
    throw invalidResponse(upload.operation, response, "a 201 without Location or Upload-Offset");
  }
  return { location: new URL(location, upload.server).href, offset };
}

/** The offset the server holds, or undefined when the upload is gone (expired, terminated). */
async function head(upload: ResumableUpload, location: string): Promise<number | undefined> {
  const { transport, signal } = upload;
  const response = await transport.send(
    location,
    {
      method: "HEAD",
      headers: transport.headers(TUS),
      ...(signal === undefined ? {} : { signal }),
    },
    upload.operation,
  );
  if (response.status === 404 || response.status === 410) return undefined;
  if (response.status !== 200) throw await refusal(response, upload.operation);
  const offset = Number(response.headers.get("upload-offset"));
  if (!Number.isSafeInteger(offset) || offset < 0 || offset > upload.archive.size) {
    throw invalidResponse(upload.operation, response, "HEAD without a usable Upload-Offset");
  }
  return offset;
}

/** PATCHes the archive from `offset` to its end; resolves with the acceptance. */
async function send(
  upload: ResumableUpload,
  location: string,
  offset: number,
): Promise<AttemptResult> {
  const { archive, transport, timeouts, signal } = upload;
  const file = createReadStream(archive.path, { start: offset, highWaterMark: 256 * 1024 });
  let sent = offset;
  const counted = (async function* () {
    for await (const chunk of file as AsyncIterable<Buffer>) {
      sent += chunk.length;
      upload.onProgress?.({ offset: sent, total: archive.size, resumed: false });
      yield chunk;
    }
  })();
  const deadline = createDeadline(timeouts.connectMs);
  try {
    const response = await transport.send(
      location,
      {
        method: "PATCH",
        headers: transport.headers({
          ...TUS,
          "content-type": "application/offset+octet-stream",
          "upload-offset": String(offset),
        }),
        body: pacedBody(counted, deadline, timeouts.requestMs),
        duplex: "half",
        ...(signal === undefined ? {} : { signal }),
      } as RequestInit,
      upload.operation,
      deadline,
    );
    if (response.status === 200 || response.status === 202) return accepted(upload, response);
    const error = await refusal(response, upload.operation);
    if (response.status === 404 || response.status === 410 || response.status === 460) {
      // Gone, or the bytes held are not this archive's: start over.
      upload.location = undefined;
      throw retryable(error);
    }
    // The server holds another offset (a request of ours it had not finished), or another
    // request writes the upload now: ask again.
    if (response.status === 409 && error.code === "offset_mismatch") throw retryable(error);
    if (response.status === 423) throw retryable(error);
    if (response.status === 204) {
      throw new UploadError(`${upload.operation}: the server holds less than was sent`, {
        status: 204,
        code: "upload_incomplete",
        retryable: true,
      });
    }
    throw error;
  } finally {
    deadline.clear();
    file.destroy();
  }
}

async function accepted(upload: ResumableUpload, response: Response): Promise<AttemptResult> {
  const body = parseWire(AcceptedBodySchema, await readBody(response, upload.operation));
  if (!body.ok) throw invalidResponse(upload.operation, response, body.problem);
  return { response, accepted: body.value };
}

function retryable(error: UploadError): UploadError {
  return new UploadError(error.message, {
    status: error.status,
    code: error.code,
    serverMessage: error.serverMessage,
    retryAfterMs: error.retryAfterMs,
    retryable: true,
  });
}

function base64(text: string): string {
  return Buffer.from(text, "utf8").toString("base64");
}
