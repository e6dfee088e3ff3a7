import { type ChildProcess, spawn } from "node:child_process";
import { connect, createServer, type Server, type Socket } from "node:net";

/** One HTTP request as the proxy saw it go by. */
export interface SeenRequest {
  method: string;
  /** Path without the query string, e.g. `/bucket/prefix/key`. */
  path: string;
  query: string;
  headers: Record<string, string>;
  /** Status of the answer the service gave (undefined while none came or when none was read). */
  status?: number;
  /** What the proxy did with it. */
  fault: Fault["kind"];
}

/**
 * What the proxy does with one request:
 * - `pass`: forwards it and its answer.
 * - `lose-answer`: forwards the request, waits for the service's answer (its status line and
 *   headers, so the service has done the work), runs `meanwhile`, then destroys the client's
 *   connection instead of forwarding the answer: the client sees a reset.
 * - `stall-request`: forwards nothing and stops reading the client's connection after the
 *   request's headers: an upload that stops mid-way, an answer that never comes.
 * - `stall-answer`: forwards the request and the answer's first `bytes` bytes (headers
 *   included), then nothing more: a download that stops mid-way.
 */
export type Fault =
  | { kind: "pass" }
  | { kind: "lose-answer"; meanwhile?: () => Promise<void> }
  | { kind: "stall-request" }
  | { kind: "stall-answer"; bytes: number };

export interface FaultProxy {
  endpoint: string;
  /** Every request seen, in order. */
  requests: SeenRequest[];
  close(): Promise<void>;
}

const HEAD_END = Buffer.from("\r\n\r\n");

/**
 * A TCP proxy in front of an HTTP/1.1 service that injects faults into chosen requests.
 * `decide` sees each request's method, path and headers before anything of it is forwarded.
 * Requests are told apart by their framing (headers, then `Content-Length` body bytes); a
 * connection whose body length the proxy cannot tell (chunked) is forwarded as is from there on.
 * The client sends its next request on a connection only after the previous answer (no
 * pipelining, as the SDK's agent), so every answer belongs to the last request sent.
 */
export async function startFaultProxy(
  target: string,
  decide: (request: SeenRequest) => Fault,
): Promise<FaultProxy> {
  const { hostname, port } = new URL(target);
  const requests: SeenRequest[] = [];
  const sockets = new Set<Socket>();
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    socket.on("error", () => undefined);
  };
  const server = createServer((client) => {
    track(client);
    const upstream = connect(Number(port), hostname);
    track(upstream);
    client.once("close", () => upstream.destroy());
    upstream.once("close", () => client.destroy());

    let pending = Buffer.alloc(0);
    let bodyLeft = 0;
    let raw = false;
    let current: { request: SeenRequest; fault: Fault } | undefined;
    let answer = Buffer.alloc(0);
    let forwarded = 0;
    let lost = false;

    client.on("data", (chunk: Buffer) => {
      if (raw) {
        upstream.write(chunk);
        return;
      }
      pending = Buffer.concat([pending, chunk]);
      while (pending.length > 0) {
        if (bodyLeft > 0) {
          const part = pending.subarray(0, bodyLeft);
          pending = pending.subarray(part.length);
          bodyLeft -= part.length;
          upstream.write(part);
          continue;
        }
        const end = pending.indexOf(HEAD_END);
        if (end === -1) return;
        const head = pending.subarray(0, end + HEAD_END.length);
        pending = pending.subarray(head.length);
        const request = parseRequest(head.toString("latin1"));
        const fault = decide(request);
        request.fault = fault.kind;
        requests.push(request);
        current = { request, fault };
        answer = Buffer.alloc(0);
        forwarded = 0;
        if (fault.kind === "stall-request") {
          client.pause();
          return;
        }
        upstream.write(head);
        if (request.headers["transfer-encoding"] !== undefined) {
          raw = true;
          upstream.write(pending);
          pending = Buffer.alloc(0);
          return;
        }
        bodyLeft = Number(request.headers["content-length"] ?? 0);
      }
    });

    upstream.on("data", (chunk: Buffer) => {
      if (lost) return;
      const fault = current?.fault ?? { kind: "pass" };
      if (current !== undefined && current.request.status === undefined) {
        answer = Buffer.concat([answer, chunk]);
        const status = finalStatus(answer);
        if (status !== undefined) current.request.status = status;
      }
      if (fault.kind === "pass") {
        client.write(chunk);
        return;
      }
      if (fault.kind === "stall-answer") {
        const room = fault.bytes - forwarded;
        if (room > 0) client.write(chunk.subarray(0, room));
        forwarded += Math.min(room, chunk.length);
        return;
      }
      if (fault.kind === "lose-answer" && current?.request.status !== undefined) {
        lost = true;
        upstream.pause();
        void (fault.meanwhile?.() ?? Promise.resolve()).finally(() => {
          client.destroy();
          upstream.destroy();
        });
      }
    });
  });
  const address = await listen(server);
  return {
    endpoint: `http://127.0.0.1:${address}`,
    requests,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function parseRequest(head: string): SeenRequest {
  const [line = "", ...fields] = head.split("\r\n");
  const [method = "", target = ""] = line.split(" ");
  const question = target.indexOf("?");
  const headers: Record<string, string> = {};
  for (const field of fields) {
    const colon = field.indexOf(":");
    if (colon > 0)
      headers[field.slice(0, colon).trim().toLowerCase()] = field.slice(colon + 1).trim();
  }
  return {
    method,
    path: decodeURIComponent(question === -1 ? target : target.slice(0, question)),
    query: question === -1 ? "" : target.slice(question + 1),
    headers,
    fault: "pass",
  };
}

/** The status of the first non-1xx answer whose headers are complete in `bytes`. */
function finalStatus(bytes: Buffer): number | undefined {
  let offset = 0;
  for (;;) {
    const end = bytes.indexOf(HEAD_END, offset);
    if (end === -1) return undefined;
    const status = Number(bytes.toString("latin1", offset, end).split(" ")[1]);
    if (status >= 200 || Number.isNaN(status)) return status;
    offset = end + HEAD_END.length;
  }
}

function listen(server: Server): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      if (address !== null && typeof address === "object") resolve(address.port);
      else reject(new Error("no port"));
    });
  });
}

/** A TCP server that accepts connections and never says a word: a hung service. */
export async function startSilentServer(): Promise<{ endpoint: string; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on("error", () => undefined);
    socket.once("close", () => sockets.delete(socket));
  });
  const port = await listen(server);
  return {
    endpoint: `http://127.0.0.1:${port}`,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * A port whose connections never complete: a child process listens with a backlog of one and
 * is then stopped (SIGSTOP), and a few connections fill its accept queue; the kernel drops the
 * SYNs of later ones, so a client's connect hangs until its own timeout.
 */
export async function startUnacceptingPort(): Promise<{
  endpoint: string;
  close(): Promise<void>;
}> {
  const child: ChildProcess = spawn(
    process.execPath,
    [
      "-e",
      `const s = require("node:net").createServer(() => {});
       s.listen({ port: 0, host: "127.0.0.1", backlog: 1 }, () => console.log(s.address().port));`,
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  const port = await new Promise<number>((resolve, reject) => {
    child.once("error", reject);
    child.stdout?.once("data", (chunk: Buffer) => resolve(Number(chunk.toString().trim())));
  });
  child.kill("SIGSTOP");
  const fillers: Socket[] = [];
  for (let index = 0; index < 4; index++) {
    const socket = connect(port, "127.0.0.1");
    socket.on("error", () => undefined);
    fillers.push(socket);
  }
  // Let the handshakes the queue has room for complete before the client under test connects.
  await new Promise((resolve) => setTimeout(resolve, 200));
  return {
    endpoint: `http://127.0.0.1:${port}`,
    close: async () => {
      for (const socket of fillers) socket.destroy();
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGKILL");
      await exited;
    },
  };
}
