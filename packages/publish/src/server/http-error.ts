import type { IncomingMessage, ServerResponse } from "node:http";
import type {
  AcceptedBody,
  CancelAnswer,
  ErrorBody,
  HealthBody,
  RunPage,
  RunRecord,
} from "@distributor/upload-client/wire";

/** Every answer's body is one of the wire records of `@distributor/upload-client/wire`. */
export type WireBody = AcceptedBody | RunRecord | RunPage | CancelAnswer | ErrorBody | HealthBody;

/** A request refused with one of the statuses of docs/integrations/http-upload.md and a JSON `{"error": {code, message}}`. */
export class HttpError extends Error {
  override readonly name = "HttpError";
  readonly status: number;
  readonly code: string;
  readonly headers: Readonly<Record<string, string>>;

  constructor(
    status: number,
    code: string,
    message: string,
    options: { headers?: Record<string, string>; cause?: unknown } = {},
  ) {
    super(message, { cause: options.cause });
    this.status = status;
    this.code = code;
    this.headers = options.headers ?? {};
  }
}

/** How long a client that is still sending a refused body gets to read the answer (a loaded
 * client machine can take over a second to get to it). */
const UNREAD_BODY_GRACE_MS = 5000;

/** Writes a JSON response. */
export function sendJson(
  response: ServerResponse,
  status: number,
  body: WireBody,
  headers: Readonly<Record<string, string>> = {},
): void {
  const text = `${JSON.stringify(body)}\n`;
  response.writeHead(status, {
    "Content-Type": "application/json; charset=utf-8",
    "Content-Length": String(Buffer.byteLength(text)),
    "Cache-Control": "no-store",
    ...headers,
  });
  response.end(text);
}

/**
 * Answers before the request body was read to its end: the connection closes after the answer,
 * and is cut after a short grace if the client keeps sending, so the rest is never read.
 */
export function sendBeforeBody(
  request: IncomingMessage,
  response: ServerResponse,
  status: number,
  body: WireBody,
  headers: Readonly<Record<string, string>> = {},
): void {
  response.on("finish", () => {
    if (request.complete) return;
    setTimeout(() => request.socket.destroy(), UNREAD_BODY_GRACE_MS).unref();
  });
  sendJson(response, status, body, { ...headers, Connection: "close" });
}

export function errorBody(code: string, message: string): ErrorBody {
  return { error: { code, message } };
}
