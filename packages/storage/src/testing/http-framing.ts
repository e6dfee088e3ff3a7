/** A request the proxy saw: its method and request target as sent (query included). */
export interface ProxiedRequest {
  method: string;
  path: string;
}

export interface ProxiedRequestHead extends ProxiedRequest {
  /** Header names in lower case; repeated fields joined with ", ". */
  headers: Record<string, string>;
}

/** How a message's body is delimited; `raw`: the rest of the stream, never parsed again. */
export type Framing =
  | { kind: "none" }
  | { kind: "length"; length: number }
  | { kind: "chunked" }
  | { kind: "close" }
  | { kind: "raw" };

interface MessageEvents {
  /** A complete head, before its bytes go on: how its body is framed, `undefined` if not HTTP. */
  head(lines: string[]): Framing | undefined;
  /** The stream's bytes, each exactly once and in order. */
  bytes(bytes: Buffer): void;
  /** The message whose head came last is complete. */
  end(): void;
}

const MAX_HEAD_BYTES = 64 * 1024;
const MAX_LINE_BYTES = 4096;

/**
 * Splits an HTTP/1.1 byte stream into messages without changing a byte: heads are held until
 * complete (so a fault can be decided before any of a request is forwarded), bodies pass as they
 * come. Bytes that do not parse as HTTP pass through raw from then on.
 */
export class HttpFramer {
  private state: "head" | "length" | "chunk-size" | "chunk-data" | "trailer" | "close" | "raw" =
    "head";
  private pending = Buffer.alloc(0);
  private line = "";
  private remaining = 0;

  constructor(private readonly events: MessageEvents) {}

  feed(chunk: Buffer): void {
    let at = 0;
    while (at < chunk.length) {
      switch (this.state) {
        case "head":
          at = this.readHead(chunk, at);
          break;
        case "length":
        case "chunk-data": {
          const take = Math.min(this.remaining, chunk.length - at);
          this.events.bytes(chunk.subarray(at, at + take));
          at += take;
          this.remaining -= take;
          if (this.remaining > 0) break;
          if (this.state === "length") this.endMessage();
          // The CRLF after a chunk's data is read as an empty size line.
          else this.state = "chunk-size";
          break;
        }
        case "chunk-size":
        case "trailer":
          at = this.readLine(chunk, at);
          break;
        case "close":
        case "raw":
          this.events.bytes(chunk.subarray(at));
          at = chunk.length;
          break;
      }
    }
  }

  /** From now on the stream is not HTTP (an upgrade, a tunnel): pass everything on as it is. */
  passThrough(): void {
    const pending = this.pending;
    this.pending = Buffer.alloc(0);
    this.state = "raw";
    if (pending.length > 0) this.events.bytes(pending);
  }

  /** The stream ended: a message delimited by the close is complete. */
  finish(): void {
    if (this.state === "close") this.endMessage();
  }

  private readHead(chunk: Buffer, at: number): number {
    const before = this.pending.length;
    const joined =
      before === 0 ? chunk.subarray(at) : Buffer.concat([this.pending, chunk.subarray(at)]);
    const end = joined.indexOf("\r\n\r\n", Math.max(0, before - 3));
    if (end === -1) {
      if (joined.length > MAX_HEAD_BYTES) {
        this.pending = Buffer.alloc(0);
        this.state = "raw";
        this.events.bytes(joined);
      } else {
        this.pending = Buffer.from(joined);
      }
      return chunk.length;
    }
    this.pending = Buffer.alloc(0);
    const head = joined.subarray(0, end + 4);
    // Empty lines before a message are allowed (RFC 9112 §2.2).
    const lines = head
      .toString("latin1", 0, end)
      .replace(/^(\r\n)+/, "")
      .split("\r\n");
    const framing = this.events.head(lines);
    this.events.bytes(head);
    if (framing === undefined) this.state = "raw";
    else this.begin(framing);
    return at + head.length - before;
  }

  private readLine(chunk: Buffer, at: number): number {
    const newline = chunk.indexOf(0x0a, at);
    const end = newline === -1 ? chunk.length : newline + 1;
    this.events.bytes(chunk.subarray(at, end));
    this.line += chunk.toString("latin1", at, end);
    if (newline === -1) {
      if (this.line.length > MAX_LINE_BYTES) this.state = "raw";
      return end;
    }
    const line = this.line.trim();
    this.line = "";
    if (this.state === "trailer") {
      if (line === "") this.endMessage();
      return end;
    }
    // The CRLF closing the previous chunk's data.
    if (line === "") return end;
    const size = Number.parseInt(line.split(";")[0] ?? "", 16);
    if (Number.isNaN(size)) this.state = "raw";
    else if (size === 0) this.state = "trailer";
    else {
      this.state = "chunk-data";
      this.remaining = size;
    }
    return end;
  }

  private begin(framing: Framing): void {
    switch (framing.kind) {
      case "none":
        this.endMessage();
        break;
      case "length":
        if (framing.length === 0) this.endMessage();
        else {
          this.state = "length";
          this.remaining = framing.length;
        }
        break;
      case "chunked":
        this.state = "chunk-size";
        break;
      case "close":
      case "raw":
        this.state = framing.kind;
        break;
    }
  }

  private endMessage(): void {
    this.state = "head";
    this.events.end();
  }
}

export function parseRequestHead(lines: string[]): ProxiedRequestHead | undefined {
  const start = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+) (\S+) HTTP\/1\.[01]$/.exec(lines[0] ?? "");
  if (start === null) return undefined;
  return { method: start[1] as string, path: start[2] as string, headers: parseFields(lines) };
}

export function parseResponseHead(
  lines: string[],
): { status: number; headers: Record<string, string> } | undefined {
  const start = /^HTTP\/1\.[01] (\d{3})(?: .*)?$/.exec(lines[0] ?? "");
  if (start === null) return undefined;
  return { status: Number(start[1]), headers: parseFields(lines) };
}

function parseFields(lines: string[]): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const field of lines.slice(1)) {
    const colon = field.indexOf(":");
    if (colon <= 0) continue;
    const name = field.slice(0, colon).trim().toLowerCase();
    const value = field.slice(colon + 1).trim();
    headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
  }
  return headers;
}

function isChunked(headers: Record<string, string>): boolean {
  return /(^|,)\s*chunked\s*$/i.test(headers["transfer-encoding"] ?? "");
}

function contentLength(headers: Record<string, string>): number | undefined {
  const value = headers["content-length"];
  if (value === undefined) return undefined;
  // Repeated identical values ("5, 5") are one length.
  const length = Number(value.split(",")[0]);
  return Number.isSafeInteger(length) && length >= 0 ? length : undefined;
}

/** RFC 9112 §6.3 for requests: chunked, else Content-Length, else no body. */
export function requestFraming(headers: Record<string, string>): Framing {
  if (isChunked(headers)) return { kind: "chunked" };
  const length = contentLength(headers);
  return length === undefined ? { kind: "none" } : { kind: "length", length };
}

/** RFC 9112 §6.3 for answers: no body for HEAD, 204 and 304; otherwise as the head says, or to the close. */
export function responseFraming(
  method: string,
  status: number,
  headers: Record<string, string>,
): Framing {
  if (method === "HEAD" || status === 204 || status === 304) return { kind: "none" };
  if (method === "CONNECT" && status < 300) return { kind: "raw" };
  if (isChunked(headers)) return { kind: "chunked" };
  if (headers["transfer-encoding"] !== undefined) return { kind: "close" };
  const length = contentLength(headers);
  return length === undefined ? { kind: "close" } : { kind: "length", length };
}
