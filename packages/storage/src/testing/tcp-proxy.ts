import { createConnection, createServer, type Socket } from "node:net";
import { performance } from "node:perf_hooks";

/**
 * A TCP proxy on loopback for tests and benchmarks: latency and a bandwidth cap simulated in
 * userspace (no netem here), and faults injected between a client and a real server — answers
 * lost, held or refused (HTTP), every connection cut, or a server that accepts and never answers.
 */
export interface TcpProxyOptions {
  target: { host: string; port: number };
  /** Extra delay added to each direction (ms): round trip = 2 × delayMs. Order preserved. */
  delayMs?: number;
  /** Optional bandwidth cap per direction, bytes/second. */
  bytesPerSecond?: number;
  /**
   * Parse client→server bytes as HTTP/1.1 requests (keep-alive, Content-Length and chunked bodies;
   * no pipelining) to count them and target faults at them.
   */
  http?: boolean;
}

/** A request the proxy saw: its method and request target as sent (query included). */
export interface ProxiedRequest {
  method: string;
  path: string;
}

/** A request the proxy saw, with when its head arrived, in milliseconds since the proxy started. */
export interface TimedRequest extends ProxiedRequest {
  at: number;
}

export interface ProxiedRequestHead extends ProxiedRequest {
  /** Header names in lower case; repeated fields joined with ", ". */
  headers: Record<string, string>;
}

export type RequestMatch = (request: ProxiedRequestHead) => boolean;

export interface TcpProxy {
  port: number;
  host: "127.0.0.1";
  /** HTTP mode: the requests seen since the start or the last `resetCounts`, in order. */
  requests(): ProxiedRequest[];
  /** The same requests with the time each arrived, for a benchmark's timeline. */
  timeline(): TimedRequest[];
  resetCounts(): void;
  /**
   * HTTP mode: the next request matching `match` is forwarded; the server's answer is received in
   * full, then dropped and the client connection reset instead. Models "done, but the answer was
   * lost". Resolves once the client was reset, with the request.
   */
  loseAnswer(match: RequestMatch): Promise<ProxiedRequest>;
  /**
   * HTTP mode: the next matching request is forwarded and its answer held forever: the client
   * waits until it gives up. Models "done, never answered". Resolves once the answer was held.
   */
  holdAnswer(match: RequestMatch): Promise<ProxiedRequest>;
  /**
   * HTTP mode: the next matching request is not forwarded at all; the client connection is reset.
   * Models "failed before doing". Resolves once the client was reset.
   */
  refuse(match: RequestMatch): Promise<ProxiedRequest>;
  /**
   * Any protocol: from now on server→client bytes (in flight ones too) are swallowed, and after
   * `afterMs` (default 0) every connection is destroyed, the client side reset. Resolves when it
   * fired; connections made afterwards work again.
   */
  cutAll(options?: { afterMs?: number }): Promise<void>;
  /**
   * From now on accept connections but never forward or answer anything (a hung server): new
   * connections never reach the target, and open ones stop carrying bytes either way. `false`
   * undoes it for new connections; the hung ones stay hung until their client gives up.
   */
  hang(on?: boolean): void;
  /** Stops listening and destroys every connection; pending faults reject. */
  close(): Promise<void>;
}

/** Listens on a free port of 127.0.0.1 and proxies every connection to `options.target`. */
export async function startTcpProxy(options: TcpProxyOptions): Promise<TcpProxy> {
  const delayMs = options.delayMs ?? 0;
  const bytesPerSecond = options.bytesPerSecond;
  if (!Number.isFinite(delayMs) || delayMs < 0) {
    throw new RangeError(`delayMs must be a finite number ≥ 0, got ${delayMs}`);
  }
  if (bytesPerSecond !== undefined && !(Number.isFinite(bytesPerSecond) && bytesPerSecond > 0)) {
    throw new RangeError(`bytesPerSecond must be a finite number > 0, got ${bytesPerSecond}`);
  }
  const proxy = new ProxyState(options, {
    delayMs,
    bytesPerSecond,
    // What TCP would keep in flight: the bandwidth-delay product and a little queue when capped,
    // a generous window otherwise, so a delay alone does not throttle throughput.
    backlogLimit:
      bytesPerSecond === undefined
        ? 8 * 1024 * 1024
        : Math.max(64 * 1024, Math.ceil((bytesPerSecond * (delayMs + 20)) / 1000)),
  });
  const server = createServer({ allowHalfOpen: true }, (client) => proxy.accept(client));
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("the proxy has no port");

  const needsHttp = (fault: string): void => {
    if (!options.http) throw new Error(`${fault} needs a proxy started with http: true`);
  };
  let closing: Promise<void> | undefined;
  return {
    port: address.port,
    host: "127.0.0.1",
    requests: () => proxy.seen.map(({ method, path }) => ({ method, path })),
    timeline: () => proxy.seen.map(({ method, path, at }) => ({ method, path, at })),
    resetCounts: () => {
      proxy.seen.length = 0;
    },
    loseAnswer: (match) => {
      needsHttp("loseAnswer");
      return proxy.addRule("lose", match);
    },
    holdAnswer: (match) => {
      needsHttp("holdAnswer");
      return proxy.addRule("hold", match);
    },
    refuse: (match) => {
      needsHttp("refuse");
      return proxy.addRule("refuse", match);
    },
    cutAll: ({ afterMs = 0 } = {}) => proxy.cutAll(afterMs),
    hang: (on = true) => proxy.hang(on),
    close: () => {
      closing ??= (async () => {
        const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
        await proxy.close();
        await stopped;
      })();
      return closing;
    },
  };
}

interface Shape {
  delayMs: number;
  bytesPerSecond: number | undefined;
  /** Bytes a lane holds before it pauses its source, as a full TCP window would. */
  backlogLimit: number;
}

type FaultKind = "lose" | "hold" | "refuse";

/** A fault waiting for its request, then carried out on that request's connection. */
class Rule {
  /** The fault happened (answer received, or request withheld): a torn-down connection counts it. */
  done = false;
  request: ProxiedRequest | undefined;
  private settled = false;

  constructor(
    readonly kind: FaultKind,
    readonly match: RequestMatch,
    private readonly resolve: (request: ProxiedRequest) => void,
    private readonly reject: (error: Error) => void,
  ) {}

  succeed(): void {
    if (this.settled) return;
    this.settled = true;
    this.resolve(this.request ?? { method: "", path: "" });
  }

  fail(error: Error): void {
    if (this.settled) return;
    this.settled = true;
    this.reject(error);
  }
}

class ProxyState {
  readonly seen: TimedRequest[] = [];
  readonly started = performance.now();
  readonly connections = new Set<ProxiedConnection>();
  private readonly rules: Rule[] = [];
  private readonly cuts = new Set<{ timer: NodeJS.Timeout; reject: (error: Error) => void }>();
  hung = false;
  closed = false;

  constructor(
    readonly options: TcpProxyOptions,
    readonly shape: Shape,
  ) {}

  /** While a cut is pending, nothing from a server reaches its client. */
  get cutting(): boolean {
    return this.cuts.size > 0;
  }

  accept(client: Socket): void {
    if (this.closed) {
      client.destroy();
      return;
    }
    this.connections.add(new ProxiedConnection(this, client));
  }

  addRule(kind: FaultKind, match: RequestMatch): Promise<ProxiedRequest> {
    if (this.closed) throw new Error("the proxy is closed");
    const promise = new Promise<ProxiedRequest>((resolve, reject) => {
      this.rules.push(new Rule(kind, match, resolve, reject));
    });
    // A caller that never awaits a fault (its request never came) must not see an unhandled
    // rejection when the proxy closes; one that awaits still gets it.
    promise.catch(() => undefined);
    return promise;
  }

  /** The first waiting fault whose `match` accepts `request`, removed from the waiting list. */
  takeRule(request: ProxiedRequestHead): Rule | undefined {
    for (let index = 0; index < this.rules.length; index++) {
      const rule = this.rules[index] as Rule;
      let hit: boolean;
      try {
        hit = rule.match(request);
      } catch (error) {
        this.rules.splice(index--, 1);
        rule.fail(error instanceof Error ? error : new Error(String(error)));
        continue;
      }
      if (!hit) continue;
      this.rules.splice(index, 1);
      rule.request = { method: request.method, path: request.path };
      return rule;
    }
    return undefined;
  }

  cutAll(afterMs: number): Promise<void> {
    if (this.closed) throw new Error("the proxy is closed");
    for (const connection of this.connections) connection.silenceServer();
    const promise = new Promise<void>((resolve, reject) => {
      const cut = {
        reject,
        timer: setTimeout(() => {
          this.cuts.delete(cut);
          for (const connection of this.connections) connection.destroy();
          resolve();
        }, afterMs),
      };
      this.cuts.add(cut);
    });
    promise.catch(() => undefined);
    return promise;
  }

  hang(on: boolean): void {
    this.hung = on;
    if (on) for (const connection of this.connections) connection.freeze();
  }

  async close(): Promise<void> {
    this.closed = true;
    const closedError = () => new Error("the proxy closed");
    for (const rule of this.rules.splice(0)) rule.fail(closedError());
    for (const cut of this.cuts) {
      clearTimeout(cut.timer);
      cut.reject(closedError());
    }
    this.cuts.clear();
    const connections = [...this.connections];
    for (const connection of connections) connection.destroy();
    await Promise.all(connections.map((connection) => connection.closed));
  }
}

/** What the server still owes for a forwarded request, and the fault riding on it. */
interface Answer {
  method: string;
  rule: Rule | undefined;
}

/** One client connection and, unless the proxy hangs, its connection to the target. */
class ProxiedConnection {
  readonly closed: Promise<void>;
  private readonly server: Socket | undefined;
  private readonly toServer: Lane | undefined;
  private readonly toClient: Lane | undefined;
  private clientClosed = false;
  private serverClosed = false;
  private finished = false;
  private markClosed: () => void = () => undefined;
  /** Hung: nothing is carried either way any more. */
  private frozen = false;
  /** An answer was lost or held: the client hears nothing more from the server. */
  private silenced = false;
  /** A request was refused: nothing more from the client reaches the server. */
  private refused = false;
  private readonly requestFramer: HttpFramer | undefined;
  private readonly responseFramer: HttpFramer | undefined;
  private readonly awaiting: Answer[] = [];
  private answering: Answer | undefined;
  private readonly rules = new Set<Rule>();

  constructor(
    private readonly proxy: ProxyState,
    private readonly client: Socket,
  ) {
    this.closed = new Promise((resolve) => {
      this.markClosed = resolve;
    });
    client.setNoDelay(true);
    client.on("error", () => undefined);
    client.on("close", (hadError) => this.clientGone(hadError));
    if (proxy.hung) {
      // Keep reading, so a client that gives up is noticed, but pass nothing on.
      this.frozen = true;
      client.on("data", () => undefined);
      return;
    }
    const server = createConnection({
      host: proxy.options.target.host,
      port: proxy.options.target.port,
      allowHalfOpen: true,
      noDelay: true,
    });
    this.server = server;
    this.toServer = new Lane(proxy.shape, client, server);
    this.toClient = new Lane(proxy.shape, server, client);
    if (proxy.options.http) {
      this.requestFramer = new HttpFramer({
        head: (lines) => this.requestHead(lines),
        bytes: (bytes) => {
          if (!this.refused) this.toServer?.carry(bytes);
        },
        end: () => undefined,
      });
      this.responseFramer = new HttpFramer({
        head: (lines) => this.responseHead(lines),
        bytes: (bytes) => {
          if (!this.silenced && !this.answering?.rule) this.toClient?.carry(bytes);
        },
        end: () => this.answerEnded(),
      });
    }
    server.on("error", () => undefined);
    server.on("close", (hadError) => this.serverGone(hadError));
    client.on("data", (chunk: Buffer) => {
      if (this.frozen || this.refused) return;
      if (this.requestFramer) this.requestFramer.feed(chunk);
      else this.toServer?.carry(chunk);
    });
    client.on("end", () => {
      if (!this.frozen) this.toServer?.end();
    });
    server.on("data", (chunk: Buffer) => {
      if (this.frozen || this.proxy.cutting) return;
      if (this.responseFramer) this.responseFramer.feed(chunk);
      else if (!this.silenced) this.toClient?.carry(chunk);
    });
    server.on("end", () => {
      // A close-delimited answer ends with the connection.
      this.responseFramer?.finish();
      if (!this.frozen && !this.silenced && !this.proxy.cutting) this.toClient?.end();
    });
  }

  /** Drops what is in flight from the server: a cut loses it too. */
  silenceServer(): void {
    this.toClient?.drop();
  }

  freeze(): void {
    this.frozen = true;
  }

  /** Resets the client and closes the server side, at once. */
  destroy(): void {
    this.toServer?.drop();
    this.toClient?.drop();
    resetSocket(this.client);
    this.server?.destroy();
  }

  private requestHead(lines: string[]): Framing | undefined {
    const request = parseRequestHead(lines);
    if (request === undefined) return undefined;
    this.proxy.seen.push({
      method: request.method,
      path: request.path,
      at: performance.now() - this.proxy.started,
    });
    const rule = this.proxy.takeRule(request);
    if (rule !== undefined) this.rules.add(rule);
    if (rule?.kind === "refuse") {
      rule.done = true;
      this.refused = true;
      // The refusal reaches the client as a server's reset would: after a round trip.
      this.toServer?.after(() => {
        this.toClient?.after(() => {
          resetSocket(this.client);
          rule.succeed();
        });
        this.server?.destroy();
      });
    } else {
      this.awaiting.push({ method: request.method, rule });
    }
    return requestFraming(request.headers);
  }

  private responseHead(lines: string[]): Framing | undefined {
    const response = parseResponseHead(lines);
    if (response === undefined) return undefined;
    // Switching protocols: whatever follows is not HTTP any more, either way.
    if (response.status === 101) {
      this.requestFramer?.passThrough();
      return { kind: "raw" };
    }
    // Interim answers (100 Continue) reach the client whatever the fault on the final one.
    if (response.status < 200) {
      this.answering = undefined;
      return { kind: "none" };
    }
    const answer = this.awaiting.shift() ?? { method: "GET", rule: undefined };
    this.answering = answer.rule ? answer : undefined;
    const framing = responseFraming(answer.method, response.status, response.headers);
    if (framing.kind === "raw") this.requestFramer?.passThrough();
    return framing;
  }

  private answerEnded(): void {
    const rule = this.answering?.rule;
    this.answering = undefined;
    if (rule === undefined) return;
    rule.done = true;
    this.silenced = true;
    if (rule.kind === "hold") {
      rule.succeed();
      return;
    }
    this.toClient?.after(() => {
      resetSocket(this.client);
      this.server?.destroy();
      rule.succeed();
    });
  }

  private clientGone(hadError: boolean): void {
    this.clientClosed = true;
    this.toClient?.drop();
    if (this.frozen || this.refused) this.server?.destroy();
    else this.toServer?.abort(hadError);
    this.settleIfDone();
  }

  private serverGone(hadError: boolean): void {
    this.serverClosed = true;
    this.toServer?.drop();
    // Lost, held, cut or hung: the client learns nothing from the server, not even its close.
    if (!this.frozen && !this.silenced && !this.proxy.cutting) this.toClient?.abort(hadError);
    this.settleIfDone();
  }

  private settleIfDone(): void {
    if (this.finished || !this.clientClosed || !(this.serverClosed || this.server === undefined)) {
      return;
    }
    this.finished = true;
    this.proxy.connections.delete(this);
    for (const rule of this.rules) {
      if (rule.done) rule.succeed();
      else rule.fail(new Error(`the connection closed before the answer to ${named(rule)}`));
    }
    this.markClosed();
  }
}

function named(rule: Rule): string {
  return rule.request ? `${rule.request.method} ${rule.request.path}` : "a request";
}

/** Resets rather than closes, so the peer sees ECONNRESET as from a server that went away. */
function resetSocket(socket: Socket): void {
  if (socket.destroyed) return;
  // Not connected, or already shut down for writing (libuv refuses to reset it then, and the
  // socket would never close): a plain close.
  if (socket.connecting || socket.pending || socket.writableEnded) socket.destroy();
  else socket.resetAndDestroy();
}

type Carried = { due: number; bytes: Buffer } | { due: number; act: () => void };

/**
 * One direction of a connection: every chunk leaves `delayMs` after it arrived (after its
 * serialization time too, under a bandwidth cap), in arrival order. Due times never decrease and
 * only the head of the queue waits on a timer, so nothing is ever reordered.
 */
class Lane {
  private queue: Carried[] = [];
  private queued = 0;
  /** When the capped link has sent everything queued so far. */
  private lineFreeAt = 0;
  private timer: NodeJS.Timeout | undefined;
  private blocked = false;
  private pausedSource = false;
  private dropped = false;
  private finishing: "end" | "reset" | undefined;

  constructor(
    private readonly shape: Shape,
    private readonly source: Socket,
    private readonly sink: Socket,
  ) {
    sink.on("drain", () => {
      this.blocked = false;
      this.flush();
    });
  }

  carry(bytes: Buffer): void {
    if (this.dropped || this.finishing !== undefined || bytes.length === 0) return;
    const now = performance.now();
    const rate = this.shape.bytesPerSecond;
    if (rate === undefined) {
      this.enqueue({ due: now + this.shape.delayMs, bytes });
    } else {
      // Slices of about 10 ms of transfer, so a capped stream trickles rather than lurches.
      const slice = Math.max(1024, Math.floor(rate / 100));
      for (let offset = 0; offset < bytes.length; offset += slice) {
        const part = bytes.subarray(offset, offset + slice);
        this.lineFreeAt = Math.max(now, this.lineFreeAt) + (part.length * 1000) / rate;
        this.enqueue({ due: this.lineFreeAt + this.shape.delayMs, bytes: part });
      }
    }
    if (this.queued > this.shape.backlogLimit && !this.pausedSource) {
      this.pausedSource = true;
      this.source.pause();
    }
    this.flush();
  }

  /** Runs `act` once everything carried so far has arrived, as if it travelled with the bytes. */
  after(act: () => void): void {
    if (this.dropped) return;
    const now = performance.now();
    this.enqueue({ due: Math.max(now, this.lineFreeAt) + this.shape.delayMs, act });
    this.flush();
  }

  /** The source ended cleanly: end the sink after the bytes in flight. */
  end(): void {
    if (this.finishing !== undefined) return;
    this.finishing = "end";
    this.after(() => this.sink.end());
  }

  /** The source went away: after the bytes in flight, reset the sink unless it ended cleanly. */
  abort(hadError: boolean): void {
    if (this.finishing === "reset" || (this.finishing === "end" && !hadError)) return;
    this.finishing = "reset";
    this.after(() => resetSocket(this.sink));
  }

  /** Forgets everything in flight and carries nothing more. */
  drop(): void {
    this.dropped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.queue = [];
    this.queued = 0;
    if (this.pausedSource) {
      this.pausedSource = false;
      this.source.resume();
    }
  }

  private enqueue(item: Carried): void {
    this.queue.push(item);
    if ("bytes" in item) this.queued += item.bytes.length;
  }

  private flush(): void {
    // A pending timer is for the head, which is not due yet.
    if (this.timer !== undefined) return;
    while (!this.blocked && !this.dropped) {
      const next = this.queue[0];
      if (next === undefined) break;
      const wait = next.due - performance.now();
      if (wait > 0) {
        this.timer = setTimeout(() => {
          this.timer = undefined;
          this.flush();
        }, Math.ceil(wait));
        break;
      }
      this.queue.shift();
      if ("act" in next) {
        next.act();
        continue;
      }
      this.queued -= next.bytes.length;
      if (!this.sink.destroyed && !this.sink.write(next.bytes)) this.blocked = true;
    }
    if (this.pausedSource && this.queued <= this.shape.backlogLimit / 2) {
      this.pausedSource = false;
      this.source.resume();
    }
  }
}

/** How a message's body is delimited; `raw`: the rest of the stream, never parsed again. */
type Framing =
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
class HttpFramer {
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

function parseRequestHead(lines: string[]): ProxiedRequestHead | undefined {
  const start = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+) (\S+) HTTP\/1\.[01]$/.exec(lines[0] ?? "");
  if (start === null) return undefined;
  return { method: start[1] as string, path: start[2] as string, headers: parseFields(lines) };
}

function parseResponseHead(
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
function requestFraming(headers: Record<string, string>): Framing {
  if (isChunked(headers)) return { kind: "chunked" };
  const length = contentLength(headers);
  return length === undefined ? { kind: "none" } : { kind: "length", length };
}

/** RFC 9112 §6.3 for answers: no body for HEAD, 204 and 304; otherwise as the head says, or to the close. */
function responseFraming(method: string, status: number, headers: Record<string, string>): Framing {
  if (method === "HEAD" || status === 204 || status === 304) return { kind: "none" };
  if (method === "CONNECT" && status < 300) return { kind: "raw" };
  if (isChunked(headers)) return { kind: "chunked" };
  if (headers["transfer-encoding"] !== undefined) return { kind: "close" };
  const length = contentLength(headers);
  return length === undefined ? { kind: "close" } : { kind: "length", length };
}
