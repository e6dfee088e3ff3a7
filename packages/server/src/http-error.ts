import type { IncomingMessage, ServerResponse } from "node:http";
import type {
  AcceptedBody,
  CancelAnswer,
  ErrorBody,
  HealthBody,
  RunPage,
  RunRecord,
} from "@distributor/upload-store/wire";

/** Every answer's body is one of the wire records of `@distributor/upload-store/wire`. */
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

/** How much of a refused body is read and thrown away, at most, while the client gets there. */
const UNREAD_BODY_DRAIN_BYTES = 8 * 1024 * 1024;

/** Writes a JSON response. */
export function sendJson(
  response: ServerResponse,
  status: number,
  body: WireBody,
  headers: Readonly<Record<string, string>> = {},
): void {
  const text = `${JSON.stringify(body)}\n`;
  response.writeHead(status, { ...jsonHeaders(text), ...headers });
  response.end(text);
}

function jsonHeaders(text: string): Record<string, string> {
  return {
    "Content-Type": "application/json; charset=utf-8",
    "Content-Length": String(Buffer.byteLength(text)),
    "Cache-Control": "no-store",
  };
}

/**
 * Answers before the request body was read to its end. The whole answer is written at once, but
 * the response is ended (which closes the connection) only once the rest of the body was read and
 * thrown away, or after UNREAD_BODY_DRAIN_BYTES more or UNREAD_BODY_GRACE_MS, whichever comes
 * first. Closing a socket with unread bytes makes the kernel send a reset, which can destroy the
 * answer before a client that is still sending has read it; draining a bounded amount first lets
 * it read the answer, the way HTTP servers linger before they close.
 */
export function sendBeforeBody(
  request: IncomingMessage,
  response: ServerResponse,
  status: number,
  body: WireBody,
  headers: Readonly<Record<string, string>> = {},
): void {
  const text = `${JSON.stringify(body)}\n`;
  response.writeHead(status, {
    ...jsonHeaders(text),
    ...headers,
    Connection: "close",
  });
  response.write(text);
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    clearTimeout(timer);
    request.removeListener("data", count);
    request.pause();
    response.end();
  };
  let drained = 0;
  const count = (chunk: Buffer) => {
    drained += chunk.length;
    if (drained > UNREAD_BODY_DRAIN_BYTES) end();
  };
  const timer = setTimeout(end, UNREAD_BODY_GRACE_MS);
  timer.unref();
  if (request.complete) {
    end();
    return;
  }
  request.on("data", count);
  request.once("end", end);
  request.once("close", end);
  request.once("error", end);
  // A body iterator that stopped reading leaves its listeners' removal to the next tick.
  setImmediate(() => {
    if (!ended) request.resume();
  });
}

export function errorBody(code: string, message: string): ErrorBody {
  return { error: { code, message } };
}
