import { randomBytes } from "node:crypto";
import { once } from "node:events";
import {
  Agent,
  createServer as createHttpServer,
  type IncomingMessage,
  request,
  type ServerResponse,
} from "node:http";
import { createConnection, createServer as createNetServer, type Socket } from "node:net";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import { startTcpProxy, type TcpProxy, type TcpProxyOptions } from "../src/testing/tcp-proxy.js";

const cleanups: (() => Promise<void> | void)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** What the target's handler saw, in order: proof that a request was (or was not) carried out. */
interface Handled {
  method: string;
  path: string;
  headers: IncomingMessage["headers"];
  body: string;
  bytes: Buffer;
}

type Handler = (request: IncomingMessage, response: ServerResponse, body: Buffer) => void;

async function startHttpTarget(handler: Handler = (_, response) => response.end("ok")) {
  const handled: Handled[] = [];
  const target = { port: 0, handled, connections: 0 };
  const server = createHttpServer((incoming, response) => {
    const chunks: Buffer[] = [];
    incoming.on("data", (chunk: Buffer) => chunks.push(chunk));
    incoming.on("end", () => {
      const body = Buffer.concat(chunks);
      handled.push({
        method: incoming.method ?? "",
        path: incoming.url ?? "",
        headers: incoming.headers,
        body: body.toString("utf8"),
        bytes: body,
      });
      handler(incoming, response, body);
    });
  });
  server.on("connection", () => target.connections++);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  target.port = (server.address() as { port: number }).port;
  cleanups.push(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  return target;
}

/** A raw TCP echo server: every byte comes back; a client's end is answered with "bye". */
async function startEchoTarget() {
  const target = { port: 0, received: "", connections: 0 };
  const sockets = new Set<Socket>();
  const server = createNetServer({ allowHalfOpen: true }, (socket) => {
    target.connections++;
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => undefined);
    socket.on("data", (chunk: Buffer) => {
      target.received += chunk.toString("latin1");
      socket.write(chunk);
    });
    socket.on("end", () => socket.end("bye"));
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  target.port = (server.address() as { port: number }).port;
  cleanups.push(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => server.close(resolve));
  });
  return target;
}

async function proxyTo(port: number, options: Omit<TcpProxyOptions, "target"> = {}) {
  const proxy = await startTcpProxy({ target: { host: "127.0.0.1", port }, ...options });
  cleanups.push(() => proxy.close());
  return proxy;
}

function keepAliveAgent(): Agent {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  cleanups.push(() => agent.destroy());
  return agent;
}

interface Sent {
  method?: string;
  path: string;
  agent?: Agent;
  /** A string is sent with Content-Length; an array as chunked, one write per element. */
  body?: string | Buffer | (string | Buffer)[];
  headers?: Record<string, string>;
  timeoutMs?: number;
}

async function send(
  proxy: TcpProxy,
  sent: Sent,
): Promise<{ status: number; headers: IncomingMessage["headers"]; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const { body } = sent;
    const headers = { ...sent.headers };
    if (Array.isArray(body)) headers["transfer-encoding"] = "chunked";
    else if (body !== undefined) headers["content-length"] = String(Buffer.byteLength(body));
    const outgoing = request(
      {
        host: proxy.host,
        port: proxy.port,
        method: sent.method ?? "GET",
        path: sent.path,
        agent: sent.agent ?? false,
        headers,
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on("data", (chunk: Buffer) => chunks.push(chunk));
        response.on("error", reject);
        response.on("end", () =>
          resolve({
            status: response.statusCode ?? 0,
            headers: response.headers,
            body: Buffer.concat(chunks),
          }),
        );
      },
    );
    outgoing.on("error", reject);
    if (sent.timeoutMs !== undefined) {
      outgoing.setTimeout(sent.timeoutMs, () => outgoing.destroy(new Error("client timeout")));
    }
    const writeBody = () => {
      if (Array.isArray(body)) {
        for (const chunk of body) outgoing.write(chunk);
        outgoing.end();
      } else {
        outgoing.end(body);
      }
    };
    if (headers.expect === "100-continue") outgoing.on("continue", writeBody);
    else writeBody();
  });
}

async function failure(promise: Promise<unknown>): Promise<NodeJS.ErrnoException> {
  return promise.then(
    () => {
      throw new Error("expected the request to fail, but it succeeded");
    },
    (error: NodeJS.ErrnoException) => error,
  );
}

/** A raw client connection through the proxy and everything it received. */
async function connectRaw(proxy: TcpProxy) {
  const socket = createConnection({ host: proxy.host, port: proxy.port, allowHalfOpen: true });
  cleanups.push(() => void socket.destroy());
  const client = {
    socket,
    received: "",
    ended: false,
    error: undefined as NodeJS.ErrnoException | undefined,
    closedAt: undefined as number | undefined,
    closed: undefined as unknown as Promise<void>,
  };
  socket.on("data", (chunk: Buffer) => {
    client.received += chunk.toString("latin1");
  });
  socket.on("end", () => {
    client.ended = true;
  });
  socket.on("error", (error) => {
    client.error = error;
  });
  client.closed = new Promise((resolve) =>
    socket.on("close", () => {
      client.closedAt = performance.now();
      resolve();
    }),
  );
  await once(socket, "connect");
  return client;
}

async function waitFor(condition: () => boolean, what: string, timeoutMs = 3000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!condition()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

describe("startTcpProxy", () => {
  describe("latency and bandwidth", () => {
    it.each([false, true])(
      "adds about twice the delay to a round trip (http: %s)",
      async (http) => {
        const target = await startHttpTarget();
        const roundTrip = async (delayMs: number): Promise<number> => {
          const proxy = await proxyTo(target.port, { delayMs, http });
          const agent = keepAliveAgent();
          // A warm connection: only the request and its answer are timed.
          await send(proxy, { path: "/warm-up", agent });
          const times: number[] = [];
          for (let attempt = 0; attempt < 3; attempt++) {
            const started = performance.now();
            expect((await send(proxy, { path: "/ping", agent })).body.toString()).toBe("ok");
            times.push(performance.now() - started);
          }
          return Math.min(...times);
        };
        const direct = await roundTrip(0);
        const delayed = await roundTrip(50);
        expect(delayed - direct).toBeGreaterThanOrEqual(90);
        expect(delayed).toBeLessThan(1000);
        // One connection each way: the delay did not make the agent reconnect.
        expect(target.connections).toBe(2);
      },
    );

    it.each([false, true])(
      "keeps a 1 MiB body streamed in many chunks byte-exact both ways (http: %s)",
      async (http) => {
        const target = await startHttpTarget((_, response, body) => {
          // The answer streams back in many small writes.
          response.writeHead(200, { "content-type": "application/octet-stream" });
          const write = (offset: number): void => {
            if (offset >= body.length) {
              response.end();
              return;
            }
            response.write(body.subarray(offset, offset + 3000));
            setImmediate(write, offset + 3000);
          };
          write(0);
        });
        const proxy = await proxyTo(target.port, { delayMs: 10, http });
        const payload = randomBytes(1024 * 1024);
        const chunks: Buffer[] = [];
        for (let offset = 0; offset < payload.length; offset += 4096) {
          chunks.push(payload.subarray(offset, offset + 4096));
        }
        const answer = await send(proxy, { method: "PUT", path: "/echo", body: chunks });
        expect(target.handled).toHaveLength(1);
        expect(target.handled[0]!.bytes.equals(payload)).toBe(true);
        expect(answer.body.length).toBe(payload.length);
        expect(answer.body.equals(payload)).toBe(true);
        expect(proxy.requests()).toEqual(http ? [{ method: "PUT", path: "/echo" }] : []);
      },
    );

    it("retargets new connections, counting the bytes sent to both", async () => {
      const first = await startHttpTarget();
      const second = await startHttpTarget();
      const proxy = await proxyTo(first.port);
      await send(proxy, { method: "PUT", path: "/one", body: ["12345"] });
      proxy.retarget({ host: "127.0.0.1", port: second.port });
      await send(proxy, { method: "PUT", path: "/two", body: ["678"] });
      expect(first.handled.map((handled) => handled.path)).toEqual(["/one"]);
      expect(second.handled.map((handled) => handled.path)).toEqual(["/two"]);
      expect(proxy.clientBytes()).toBeGreaterThan(8);
    });

    it("caps the bandwidth: 200 KiB at 100 KiB/s take at least 1.5 s", async () => {
      const size = 200 * 1024;
      const target = await startHttpTarget((_, response) => response.end(Buffer.alloc(size, 7)));
      const uncapped = await proxyTo(target.port);
      const capped = await proxyTo(target.port, { bytesPerSecond: 100 * 1024 });
      const timed = async (proxy: TcpProxy): Promise<number> => {
        const started = performance.now();
        const answer = await send(proxy, { path: "/blob" });
        expect(answer.body.length).toBe(size);
        return performance.now() - started;
      };
      expect(await timed(uncapped)).toBeLessThan(1500);
      expect(await timed(capped)).toBeGreaterThanOrEqual(1500);
    });
  });

  describe("HTTP requests", () => {
    it("counts keep-alive requests with their methods and paths, bodies of both framings", async () => {
      const target = await startHttpTarget();
      const proxy = await proxyTo(target.port, { http: true, delayMs: 5 });
      const agent = keepAliveAgent();
      await send(proxy, { path: "/bucket?list-type=2", agent });
      await send(proxy, { method: "PUT", path: "/bucket/a.txt", agent, body: "hello" });
      await send(proxy, { method: "POST", path: "/bucket/b.txt", agent, body: ["x", "yy", "zzz"] });
      expect(proxy.requests()).toEqual([
        { method: "GET", path: "/bucket?list-type=2" },
        { method: "PUT", path: "/bucket/a.txt" },
        { method: "POST", path: "/bucket/b.txt" },
      ]);
      expect(target.connections).toBe(1);
      expect(target.handled.map(({ headers, body }) => [headers["content-length"], body])).toEqual([
        [undefined, ""],
        ["5", "hello"],
        [undefined, "xyyzzz"],
      ]);
      expect(target.handled[2]!.headers["transfer-encoding"]).toBe("chunked");

      proxy.resetCounts();
      expect(proxy.requests()).toEqual([]);
      await send(proxy, { method: "DELETE", path: "/bucket/a.txt", agent });
      expect(proxy.requests()).toEqual([{ method: "DELETE", path: "/bucket/a.txt" }]);
    });

    it("follows answers without a body, 100 Continue and close-delimited ones", async () => {
      const target = await startHttpTarget((incoming, response) => {
        if (incoming.url === "/head") {
          // A HEAD answer announces a length it does not send.
          response.writeHead(200, { "content-length": "10" });
          response.end();
        } else if (incoming.url === "/none") {
          response.writeHead(204);
          response.end();
        } else if (incoming.url === "/unmodified") {
          response.writeHead(304, { etag: '"a"' });
          response.end();
        } else {
          response.end(`done ${incoming.url}`);
        }
      });
      const proxy = await proxyTo(target.port, { http: true });
      const agent = keepAliveAgent();
      expect((await send(proxy, { method: "HEAD", path: "/head", agent })).status).toBe(200);
      expect((await send(proxy, { path: "/none", agent })).status).toBe(204);
      expect((await send(proxy, { path: "/unmodified", agent })).status).toBe(304);
      const continued = await send(proxy, {
        method: "PUT",
        path: "/continued",
        agent,
        body: "after continue",
        headers: { expect: "100-continue" },
      });
      expect(continued.body.toString()).toBe("done /continued");
      expect(target.connections).toBe(1);
      // Still in step: the fault lands on the answer to the request it matched.
      const lost = proxy.loseAnswer((request) => request.path === "/last");
      expect((await failure(send(proxy, { path: "/last", agent }))).code).toBe("ECONNRESET");
      expect(await lost).toEqual({ method: "GET", path: "/last" });
      expect(target.handled.map(({ path }) => path)).toEqual([
        "/head",
        "/none",
        "/unmodified",
        "/continued",
        "/last",
      ]);
    });

    it("loseAnswer: the server does the request, the client gets a reset instead of the answer", async () => {
      const target = await startHttpTarget();
      const proxy = await proxyTo(target.port, { http: true, delayMs: 10 });
      const agent = keepAliveAgent();
      const lost = proxy.loseAnswer(
        (request) => request.method === "PUT" && request.headers["x-fault"] === "lose",
      );
      // Not matching: answered.
      await send(proxy, { method: "PUT", path: "/bucket/key", agent, body: "first" });
      const error = await failure(
        send(proxy, {
          method: "PUT",
          path: "/bucket/key",
          agent,
          body: "second",
          headers: { "x-fault": "lose" },
        }),
      );
      expect(error.code).toBe("ECONNRESET");
      expect(await lost).toEqual({ method: "PUT", path: "/bucket/key" });
      expect(target.handled.map(({ body }) => body)).toEqual(["first", "second"]);
      // Only the next matching request: the same one again is answered.
      const again = await send(proxy, {
        method: "PUT",
        path: "/bucket/key",
        agent,
        body: "third",
        headers: { "x-fault": "lose" },
      });
      expect(again.status).toBe(200);
      expect(target.handled.map(({ body }) => body)).toEqual(["first", "second", "third"]);
    });

    it("holdAnswer: the server does the request, the client waits until it gives up", async () => {
      const target = await startHttpTarget();
      const proxy = await proxyTo(target.port, { http: true });
      const held = proxy.holdAnswer((request) => request.path === "/bucket/slow");
      const started = performance.now();
      const error = await failure(
        send(proxy, { method: "POST", path: "/bucket/slow", body: "data", timeoutMs: 300 }),
      );
      expect(error.message).toBe("client timeout");
      expect(performance.now() - started).toBeGreaterThanOrEqual(290);
      expect(await held).toEqual({ method: "POST", path: "/bucket/slow" });
      expect(target.handled.map(({ method, path, body }) => [method, path, body])).toEqual([
        ["POST", "/bucket/slow", "data"],
      ]);
      // The same request again is answered.
      expect((await send(proxy, { path: "/bucket/slow", timeoutMs: 2000 })).status).toBe(200);
    });

    it("refuse: the request never reaches the server and the client gets a reset", async () => {
      const target = await startHttpTarget();
      const proxy = await proxyTo(target.port, { http: true, delayMs: 10 });
      const agent = keepAliveAgent();
      await send(proxy, { path: "/bucket/key", agent });
      const refused = proxy.refuse((request) => request.method === "DELETE");
      const error = await failure(send(proxy, { method: "DELETE", path: "/bucket/key", agent }));
      expect(error.code).toBe("ECONNRESET");
      expect(await refused).toEqual({ method: "DELETE", path: "/bucket/key" });
      // Time enough for a request that did leak through to be handled.
      await sleep(100);
      expect(target.handled.map(({ method }) => method)).toEqual(["GET"]);
      expect(proxy.requests()).toEqual([
        { method: "GET", path: "/bucket/key" },
        { method: "DELETE", path: "/bucket/key" },
      ]);
      expect((await send(proxy, { method: "DELETE", path: "/bucket/key", agent })).status).toBe(
        200,
      );
      expect(target.handled.map(({ method }) => method)).toEqual(["GET", "DELETE"]);
    });

    it("rejects the faults still waiting when the proxy closes", async () => {
      const target = await startHttpTarget();
      const proxy = await proxyTo(target.port, { http: true });
      const waiting = proxy.refuse(() => true);
      proxy.loseAnswer(() => true); // never awaited: must not surface as unhandled
      await proxy.close();
      await expect(waiting).rejects.toThrow("the proxy closed");
    });

    it("refuses HTTP faults on a raw proxy", async () => {
      const target = await startEchoTarget();
      const proxy = await proxyTo(target.port);
      expect(() => proxy.loseAnswer(() => true)).toThrow("http: true");
    });
  });

  describe("raw connections", () => {
    it("carries bytes and half-closes both ways", async () => {
      const target = await startEchoTarget();
      const proxy = await proxyTo(target.port, { delayMs: 10 });
      const client = await connectRaw(proxy);
      client.socket.end("ping");
      await client.closed;
      expect(client.received).toBe("pingbye");
      expect(client.ended).toBe(true);
      expect(client.error).toBeUndefined();
    });

    it("resets the client when the target refuses the connection", async () => {
      const target = await startEchoTarget();
      const proxy = await proxyTo(target.port);
      // A port nothing listens on: the target's, once it is closed.
      const gone = createNetServer();
      gone.listen(0, "127.0.0.1");
      await once(gone, "listening");
      const port = (gone.address() as { port: number }).port;
      await new Promise((resolve) => gone.close(resolve));
      const nowhere = await proxyTo(port);
      const client = await connectRaw(nowhere);
      await client.closed;
      expect(client.error?.code).toBe("ECONNRESET");
      expect(client.received).toBe("");
      // The other proxy still works.
      const working = await connectRaw(proxy);
      working.socket.write("x");
      await waitFor(() => working.received === "x", "the echo");
    });

    it("cutAll swallows the server's bytes, then destroys every connection", async () => {
      const target = await startEchoTarget();
      const proxy = await proxyTo(target.port, { delayMs: 5 });
      const client = await connectRaw(proxy);
      client.socket.write("ping");
      await waitFor(() => client.received === "ping", "the first echo");

      const cut = proxy.cutAll({ afterMs: 200 });
      const cutAt = performance.now();
      client.socket.write("lost");
      // The server still gets the client's bytes; its echo is swallowed.
      await waitFor(() => target.received === "pinglost", "the server to receive");
      await cut;
      await client.closed;
      expect(client.closedAt! - cutAt).toBeGreaterThanOrEqual(190);
      expect(client.received).toBe("ping");
      expect(client.error?.code).toBe("ECONNRESET");

      // Once fired, new connections work.
      const next = await connectRaw(proxy);
      next.socket.write("again");
      await waitFor(() => next.received === "again", "the echo after the cut");
    });

    it("hang: connections are accepted but nothing is forwarded or answered", async () => {
      const target = await startEchoTarget();
      const proxy = await proxyTo(target.port);
      const before = await connectRaw(proxy);
      before.socket.write("a");
      await waitFor(() => before.received === "a", "the echo before the hang");

      proxy.hang();
      const fresh = await connectRaw(proxy);
      fresh.socket.write("hello");
      before.socket.write("b");
      await sleep(300);
      expect(fresh.received).toBe("");
      expect(before.received).toBe("a");
      expect(target.received).toBe("a");
      expect(target.connections).toBe(1);
      expect(fresh.socket.destroyed).toBe(false);

      proxy.hang(false);
      const after = await connectRaw(proxy);
      after.socket.write("again");
      await waitFor(() => after.received === "again", "the echo after the hang");
      expect(fresh.received).toBe("");
    });
  });
});
