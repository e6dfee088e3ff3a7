import type { IncomingMessage } from "node:http";
import { HttpError } from "../http-error.js";

// The headers of tus 1.0 (https://tus.io/protocols/resumable-upload) this server speaks: core,
// creation, expiration, termination and checksum. docs/integrations/http-upload.md describes them.

export const TUS_VERSION = "1.0.0";
export const TUS_EXTENSIONS = "creation,expiration,termination,checksum";
/** Algorithms `Upload-Checksum` may name, as Node's `createHash` knows them. */
export const CHECKSUM_ALGORITHMS: ReadonlySet<string> = new Set(["sha1", "sha256"]);
export const OFFSET_CONTENT_TYPE = "application/offset+octet-stream";

/** Headers every tus answer carries. */
export function tusHeaders(extra: Record<string, string> = {}): Record<string, string> {
  return { "Tus-Resumable": TUS_VERSION, ...extra };
}

/** True when the request speaks tus (it names a version); false for a single-request upload. */
export function speaksTus(request: IncomingMessage): boolean {
  return request.headers["tus-resumable"] !== undefined;
}

/** Refuses a version other than 1.0.0 with `412` and the versions this server speaks. */
export function checkTusVersion(request: IncomingMessage) {
  const version = request.headers["tus-resumable"];
  if (version !== TUS_VERSION) {
    throw new HttpError(
      412,
      "tus_version_unsupported",
      `Tus-Resumable must be ${TUS_VERSION}, got ${JSON.stringify(version ?? null)}`,
      { headers: tusHeaders({ "Tus-Version": TUS_VERSION }) },
    );
  }
}

/** A non-negative integer header (`Upload-Length`, `Upload-Offset`); 400 when absent or not one. */
export function byteCountHeader(request: IncomingMessage, name: string): number {
  const value = request.headers[name.toLowerCase()];
  const count = typeof value === "string" && /^\d{1,16}$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isSafeInteger(count)) {
    throw new HttpError(
      400,
      "bad_request",
      `${name} must be a non-negative integer, got ${JSON.stringify(value ?? null)}`,
      { headers: tusHeaders() },
    );
  }
  return count;
}

/**
 * `Upload-Metadata`: comma-separated `key base64value` pairs (a key alone has an empty value).
 * Keys must be unique and free of spaces and commas.
 */
export function parseUploadMetadata(header: string | undefined): Map<string, string> {
  const metadata = new Map<string, string>();
  if (header === undefined || header.trim() === "") return metadata;
  for (const pair of header.split(",")) {
    const [key, value, extra] = pair.trim().split(" ");
    const bad = (why: string) =>
      new HttpError(400, "bad_request", `Upload-Metadata ${why}`, { headers: tusHeaders() });
    if (key === undefined || key === "" || extra !== undefined)
      throw bad(`pair ${pair} is malformed`);
    if (metadata.has(key)) throw bad(`names ${key} twice`);
    if (value !== undefined && !/^[A-Za-z0-9+/]*={0,2}$/.test(value)) {
      throw bad(`value of ${key} is not base64`);
    }
    metadata.set(key, Buffer.from(value ?? "", "base64").toString("utf8"));
  }
  return metadata;
}

/** `Upload-Checksum: <algorithm> <base64 digest>`, or undefined when absent. */
export function uploadChecksum(
  request: IncomingMessage,
): { algorithm: string; digest: string } | undefined {
  const header = request.headers["upload-checksum"];
  if (header === undefined) return undefined;
  const [algorithm, digest] = (typeof header === "string" ? header : "").trim().split(" ");
  if (algorithm === undefined || !CHECKSUM_ALGORITHMS.has(algorithm)) {
    throw new HttpError(
      400,
      "checksum_algorithm_unsupported",
      `Upload-Checksum must name ${[...CHECKSUM_ALGORITHMS].join(" or ")}, got ${JSON.stringify(header)}`,
      { headers: tusHeaders({ "Tus-Checksum-Algorithm": [...CHECKSUM_ALGORITHMS].join(",") }) },
    );
  }
  if (digest === undefined || !/^[A-Za-z0-9+/]+={0,2}$/.test(digest)) {
    throw new HttpError(400, "bad_request", "Upload-Checksum digest must be base64", {
      headers: tusHeaders(),
    });
  }
  return { algorithm, digest };
}

/** `Upload-Expires` is an RFC 9110 HTTP date. */
export function httpDate(epochMs: number): string {
  return new Date(epochMs).toUTCString();
}
