import { once } from "node:events";
import { createServer, type Server, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { connectSocket } from "../src/socket.js";

/** A loopback server that keeps what each connection sends. */
async function startServer(): Promise<{ server: Server; port: number; received: () => Buffer }> {
  const chunks: Buffer[] = [];
  const server = createServer((connection) => {
    connection.on("data", (chunk: Buffer) => chunks.push(chunk));
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no TCP address");
  return { server, port: address.port, received: () => Buffer.concat(chunks) };
}

async function waitFor(condition: () => boolean): Promise<void> {
  for (let attempt = 0; attempt < 200 && !condition(); attempt++) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe("connectSocket", () => {
  const open: Array<Server | Socket> = [];
  afterEach(() => {
    for (const item of open.splice(0)) {
      if ("destroy" in item) item.destroy();
      else item.close();
    }
  });

  it("holds a turn's writes back and sends them in order once the turn ends", async () => {
    const { server, port, received } = await startServer();
    open.push(server);
    const socket = connectSocket("127.0.0.1", port);
    open.push(socket);
    await once(socket, "connect");
    expect(socket.writableCorked).toBe(0);
    socket.write(Buffer.from("len:"));
    socket.write(Buffer.from("cipher-text:"));
    socket.write("tag");
    // Nothing has left yet: the three pieces wait for the end of the turn, together.
    expect(socket.writableCorked).toBe(1);
    expect(socket.writableLength).toBe(19);
    await new Promise((resolve) => setImmediate(resolve));
    expect(socket.writableCorked).toBe(0);
    await waitFor(() => received().length === 19);
    expect(received().toString()).toBe("len:cipher-text:tag");

    // The next turn batches again.
    socket.write("more");
    expect(socket.writableCorked).toBe(1);
    await waitFor(() => received().length === 23);
    expect(received().toString()).toBe("len:cipher-text:tagmore");
  });

  it("sends what is held back when the socket is ended in the same turn", async () => {
    let ended = false;
    const chunks: Buffer[] = [];
    const server = createServer((connection) => {
      connection.on("data", (chunk: Buffer) => chunks.push(chunk));
      connection.on("end", () => {
        ended = true;
      });
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    open.push(server);
    const socket = connectSocket("127.0.0.1", (server.address() as { port: number }).port);
    open.push(socket);
    await once(socket, "connect");
    // ssh2's disconnect: a last packet, then the end of the connection.
    socket.write("disconnect:");
    socket.write("bye");
    socket.end();
    await waitFor(() => ended);
    expect(Buffer.concat(chunks).toString()).toBe("disconnect:bye");
  });

  it("reports a refused connection through the error event", async () => {
    const { server, port } = await startServer();
    server.close();
    await once(server, "close");
    const socket = connectSocket("127.0.0.1", port);
    open.push(socket);
    const [error] = (await once(socket, "error")) as [NodeJS.ErrnoException];
    expect(error.code).toBe("ECONNREFUSED");
  });

  // Node's own behaviour, which the batching must leave in place.
  it("lets a write fail once the peer has closed the connection", async () => {
    const closing = createServer((connection) => connection.end());
    closing.listen(0, "127.0.0.1");
    await once(closing, "listening");
    open.push(closing);
    const address = closing.address();
    if (address === null || typeof address === "string") throw new Error("no TCP address");
    const socket = connectSocket("127.0.0.1", address.port);
    open.push(socket);
    socket.on("error", () => undefined);
    socket.resume();
    await once(socket, "end");
    const failed = new Promise<Error | null | undefined>((resolve) =>
      socket.write("late", (error) => resolve(error)),
    );
    expect(await failed).toBeInstanceOf(Error);
  });
});
