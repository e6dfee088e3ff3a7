import { createConnection, createServer, type Socket } from "node:net";
import { performance } from "node:perf_hooks";
import {
  type Framing,
  HttpFramer,
  type ProxiedRequest,
  type ProxiedRequestHead,
  parseRequestHead,
  parseResponseHead,
  requestFraming,
  responseFraming,
} from "./http-framing.js";
import { Lane, resetSocket, type Shape } from "./lane.js";

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

/** A request the proxy saw, with when its head arrived, in milliseconds since the proxy started. */
export interface TimedRequest extends ProxiedRequest {
  at: number;
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
  /** Bytes every client sent towards the server since the start (those a cut lost included). */
  clientBytes(): number;
  /** Resolves once clients have sent `bytes` in all; rejects after `timeoutMs` (default 60 s). */
  untilClientBytes(bytes: number, timeoutMs?: number): Promise<void>;
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
  /** New connections go to `target` from now on (another instance); open ones stay. */
  retarget(target: { host: string; port: number }): void;
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
  // A copy: `retarget` changes the proxy's target, never the caller's options object.
  const proxy = new ProxyState(
    { ...options, target: { ...options.target } },
    {
      delayMs,
      bytesPerSecond,
      // What TCP would keep in flight: the bandwidth-delay product and a little queue when capped,
      // a generous window otherwise, so a delay alone does not throttle throughput.
      backlogLimit:
        bytesPerSecond === undefined
          ? 8 * 1024 * 1024
          : Math.max(64 * 1024, Math.ceil((bytesPerSecond * (delayMs + 20)) / 1000)),
    },
  );
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
    clientBytes: () => proxy.clientBytes,
    untilClientBytes: async (bytes, timeoutMs = 60_000) => {
      const deadline = Date.now() + timeoutMs;
      while (proxy.clientBytes < bytes) {
        if (Date.now() > deadline) {
          throw new Error(`only ${proxy.clientBytes} of ${bytes} bytes sent in ${timeoutMs} ms`);
        }
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
    },
    retarget: (target) => {
      proxy.options.target = { host: target.host, port: target.port };
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
  clientBytes = 0;
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
      proxy.clientBytes += chunk.length;
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
