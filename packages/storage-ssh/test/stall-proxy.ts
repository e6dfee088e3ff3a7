import { type AddressInfo, connect, createServer, type Socket } from "node:net";

/**
 * A TCP proxy in front of a real server. Once `stall()` is called it stops forwarding what the
 * server sends (and the server's end of the connection) to the client, as a network that drops
 * one direction would: the client's requests still arrive and are answered, but no answer
 * comes back, and a goodbye is never acknowledged.
 */
export interface StallProxy {
  port: number;
  stall(): void;
  /** Closes every connection through the proxy, and the proxy. */
  close(): Promise<void>;
}

export async function startStallProxy(targetPort: number): Promise<StallProxy> {
  let stalled = false;
  const pairs: { client: Socket; upstream: Socket }[] = [];
  // Half-open: the client's end is passed on, the server's only while not stalled.
  const server = createServer({ allowHalfOpen: true }, (client) => {
    const upstream = connect({ port: targetPort, host: "127.0.0.1", allowHalfOpen: true });
    pairs.push({ client, upstream });
    client.on("error", () => undefined);
    upstream.on("error", () => undefined);
    client.on("data", (chunk) => upstream.write(chunk));
    upstream.on("data", (chunk) => {
      if (!stalled) client.write(chunk);
    });
    client.on("end", () => upstream.end());
    upstream.on("end", () => {
      if (!stalled) client.end();
    });
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => {
      if (!stalled) client.destroy();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    stall() {
      stalled = true;
    },
    async close() {
      for (const { client, upstream } of pairs) {
        client.destroy();
        upstream.destroy();
      }
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
