import { formatMs, isUploadError, UploadError } from "./errors.js";
import type { ClientTimeouts, UploadClientOptions } from "./options.js";
import { parseRetryAfter } from "./retry.js";
import { ErrorBodySchema, parseWire } from "./wire.js";

/** Largest response body read; the protocol's bodies are small JSON documents. */
const MAX_RESPONSE_BYTES = 1024 * 1024;
/** Statuses worth another request: the server or a proxy in front of it is briefly unable. */
const RETRYABLE_STATUSES: ReadonlySet<number> = new Set([408, 429, 502, 503, 504]);

/** How the client reaches the server: every request goes through `send`, with these headers. */
export interface Transport {
  send(url: string, init: RequestInit, operation: string, deadline?: Deadline): Promise<Response>;
  headers(extra?: Record<string, string>): Record<string, string>;
}

export function createTransport(
  options: Pick<UploadClientOptions, "token" | "fetch">,
  timeouts: ClientTimeouts,
): Transport {
  const token = options.token;
  const fetchFn = (input: string, init: RequestInit) =>
    (options.fetch ?? globalThis.fetch)(input, init);

  /**
   * One request, aborted when a bounded wait passes: `deadline.arm(ms)` (re)starts the timer, so
   * an upload's body re-arms it with every chunk the server reads.
   */
  async function send(
    url: string,
    init: RequestInit,
    operation: string,
    deadline: Deadline = createDeadline(timeouts.connectMs + timeouts.requestMs),
  ): Promise<Response> {
    const caller = init.signal ?? undefined;
    const signal =
      caller === undefined ? deadline.signal : AbortSignal.any([caller, deadline.signal]);
    try {
      return await fetchFn(url, { ...init, signal });
    } catch (error) {
      if (caller?.aborted) throw caller.reason;
      if (deadline.signal.aborted) {
        throw new UploadError(
          `${operation}: no answer within ${formatMs(deadline.lastMs())} (the server or the network stalled)`,
          { code: "timeout", retryable: true, cause: error },
        );
      }
      throw new UploadError(`${operation}: cannot reach the server: ${networkDetail(error)}`, {
        code: "connection_failed",
        retryable: true,
        cause: error,
      });
    }
  }

  const headers = (extra: Record<string, string> = {}) => ({
    authorization: `Bearer ${token}`,
    accept: "application/json",
    ...extra,
  });

  return { send, headers };
}

export async function readBody(response: Response, operation: string): Promise<unknown> {
  let text: string;
  try {
    text = await boundedText(response, MAX_RESPONSE_BYTES);
  } catch (error) {
    if (isUploadError(error)) throw error;
    throw new UploadError(
      `${operation}: the connection broke while reading the answer: ${networkDetail(error)}`,
      { status: response.status, code: "connection_failed", retryable: true, cause: error },
    );
  }
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

export async function refusal(response: Response, operation: string): Promise<UploadError> {
  const retryAfterMs = parseRetryAfter(response.headers.get("retry-after"));
  let body: unknown;
  try {
    body = await readBody(response, operation);
  } catch {
    body = undefined;
  }
  const checked = parseWire(ErrorBodySchema, body);
  const parsed = checked.ok ? checked.value.error : undefined;
  const code = parsed?.code ?? `http_${response.status}`;
  const detail = parsed === undefined ? "" : `: ${parsed.message}`;
  const wait = retryAfterMs === undefined ? "" : ` (retry after ${formatMs(retryAfterMs)})`;
  return new UploadError(
    `${operation}: server answered ${response.status} ${code}${detail}${wait}`,
    {
      status: response.status,
      code,
      serverMessage: parsed?.message,
      retryAfterMs,
      retryable: RETRYABLE_STATUSES.has(response.status),
    },
  );
}

export function invalidResponse(
  operation: string,
  response: Response,
  problem: string,
): UploadError {
  return new UploadError(
    `${operation}: the server's ${response.status} answer is not an upload API response: ${problem}`,
    { status: response.status, code: "invalid_response" },
  );
}

export interface Deadline {
  readonly signal: AbortSignal;
  arm(ms: number): void;
  clear(): void;
  lastMs(): number;
}

/** An abort signal that fires `ms` after the last `arm`. */
export function createDeadline(ms: number): Deadline {
  const controller = new AbortController();
  let timer: ReturnType<typeof setTimeout> | undefined;
  let last = ms;
  const arm = (next: number) => {
    if (timer !== undefined) clearTimeout(timer);
    last = next;
    timer = setTimeout(() => controller.abort(new Error(`timed out after ${next} ms`)), next);
    // A request in flight keeps the process alive by its socket; the timer that bounds it must
    // not, or a deadline a failed request never cleared holds the process for its whole length.
    timer.unref?.();
  };
  arm(ms);
  return {
    signal: controller.signal,
    arm,
    clear: () => {
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
    },
    lastMs: () => last,
  };
}

/**
 * The packed body as a web stream that re-arms `deadline` with `requestMs` for every chunk the
 * server reads, and once more after the last: the answer must come within that too.
 */
export function pacedBody(
  stream: AsyncIterable<Uint8Array>,
  deadline: Deadline,
  requestMs: number,
): ReadableStream<Uint8Array> {
  const iterator = stream[Symbol.asyncIterator]();
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        deadline.arm(requestMs);
        const { value, done } = await iterator.next();
        if (done) {
          deadline.arm(requestMs);
          controller.close();
          return;
        }
        controller.enqueue(value);
      },
      async cancel(reason) {
        await iterator.return?.(reason);
      },
    },
    // Pull only when fetch reads: until then the connect timeout runs.
    { highWaterMark: 0 },
  );
}

/** Reads at most `limit` bytes of a body as UTF-8, failing beyond. */
async function boundedText(response: Response, limit: number): Promise<string> {
  if (response.body === null) return "";
  const decoder = new TextDecoder();
  let text = "";
  let size = 0;
  for await (const chunk of response.body as AsyncIterable<Uint8Array>) {
    size += chunk.byteLength;
    if (size > limit) {
      await response.body.cancel().catch(() => {});
      throw new UploadError(`the server's answer is larger than ${limit} bytes`, {
        status: response.status,
        code: "invalid_response",
      });
    }
    text += decoder.decode(chunk, { stream: true });
  }
  return text + decoder.decode();
}

/** `fetch failed` says nothing; its cause names the socket error (ECONNREFUSED, ECONNRESET, ...). */
function networkDetail(error: unknown): string {
  const parts: string[] = [];
  for (let current = error; current instanceof Error && parts.length < 4; current = current.cause) {
    const code = (current as { code?: unknown }).code;
    const text =
      typeof code === "string" && !current.message.includes(code)
        ? `${code} ${current.message}`
        : current.message;
    if (!parts.includes(text)) parts.push(text);
  }
  return parts.length === 0 ? String(error) : parts.join(": ");
}

export function isAbort(error: unknown): boolean {
  return error instanceof Error && (error.name === "AbortError" || error.name === "TimeoutError");
}
