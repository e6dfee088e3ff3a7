import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { type AddressInfo, createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { StorageBackend } from "@distributor/storage";
import { expectStorageError } from "@distributor/storage/testing";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  createSshBackend,
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_OPERATION_TIMEOUT_MS,
} from "../src/index.js";
import { startSshd, type TestSshd } from "../src/testing/index.js";
import { backendOptions, freshRoot, server, sshd } from "./fixture.js";
import { type StallProxy, startStallProxy } from "./stall-proxy.js";

/** A loopback server that accepts TCP connections and never says a word. */
async function silentServer(): Promise<{ port: number; close: () => Promise<void> }> {
  const sockets: Socket[] = [];
  const silent = createServer((socket) => sockets.push(socket));
  await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
  return {
    port: (silent.address() as AddressInfo).port,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    },
  };
}

/** Milliseconds `promise` took to settle. */
async function timed(promise: Promise<unknown>): Promise<number> {
  const started = performance.now();
  await promise.catch(() => undefined);
  return performance.now() - started;
}

describe.skipIf(sshd === null)("timeouts", () => {
  let dir: string;
  const opened: StorageBackend[] = [];
  const cleanups: (() => Promise<void>)[] = [];

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "distributor-ssh-timeouts-"));
  });
  afterEach(async () => {
    for (const backend of opened.splice(0)) await backend.close();
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    await rm(dir, { recursive: true, force: true });
  });

  /** A proxy in front of the shared sshd, and backend options that trust the server through it. */
  const throughProxy = async (): Promise<{ proxy: StallProxy; root: string }> => {
    const proxy = await startStallProxy(server().port);
    cleanups.push(() => proxy.close());
    const [, type, key] = server().knownHostsLine.trim().split(" ");
    await writeFile(join(dir, "known_hosts"), `[127.0.0.1]:${proxy.port} ${type} ${key}\n`);
    return { proxy, root: await freshRoot() };
  };
  const openThrough = async (proxy: StallProxy, root: string, operationTimeoutMs: number) => {
    const backend = await createSshBackend(
      backendOptions(root, {
        port: proxy.port,
        knownHostsFile: join(dir, "known_hosts"),
        operationTimeoutMs,
      }),
    );
    opened.push(backend);
    return backend;
  };

  it("defaults to 10 s to connect and 30 s per request", () => {
    expect(DEFAULT_CONNECT_TIMEOUT_MS).toBe(10_000);
    expect(DEFAULT_OPERATION_TIMEOUT_MS).toBe(30_000);
  });

  it("gives up on a server that accepts TCP but never speaks SSH after connectTimeoutMs", async () => {
    const { port, close } = await silentServer();
    cleanups.push(close);
    let error: Error | undefined;
    const took = await timed(
      expectStorageError(
        createSshBackend(backendOptions(await freshRoot(), { port, connectTimeoutMs: 400 })),
        "unavailable",
      ).then((found) => {
        error = found;
      }),
    );
    expect(error?.message).toContain("open backend ssh:");
    expect(error?.message).toContain(`127.0.0.1:${port}`);
    expect(error?.message).toContain(
      "timed out: no SSH handshake and authentication within 400 ms",
    );
    expect(took).toBeLessThan(2_000);
  });

  it("gives up on a server whose SFTP subsystem never answers after connectTimeoutMs", async () => {
    // Authentication succeeds; the subsystem is a process that never sends its VERSION packet.
    const own: TestSshd = await startSshd({ sftpSubsystem: "/bin/sleep 30" });
    cleanups.push(() => own.stop());
    const knownHostsFile = join(dir, "known_hosts_own");
    await writeFile(knownHostsFile, own.knownHostsLine);
    let error: Error | undefined;
    const took = await timed(
      expectStorageError(
        createSshBackend({
          host: own.host,
          port: own.port,
          user: own.user,
          root: own.sftpRoot,
          authentication: { method: "private_key", privateKey: await readFile(own.clientKeyFile) },
          knownHostsFile,
          connectTimeoutMs: 1_000,
        }),
        "unavailable",
      ).then((found) => {
        error = found;
      }),
    );
    expect(error?.message).toContain("timed out: the SFTP session did not start within 1 s");
    expect(took).toBeLessThan(5_000);
  });

  it("fails a request that gets no answer within operationTimeoutMs and closes the connection", async () => {
    const { proxy, root } = await throughProxy();
    const backend = await openThrough(proxy, root, 400);
    await backend.writeFile("dir/a.txt", "a");
    proxy.stall();
    let error: Error | undefined;
    const took = await timed(
      expectStorageError(backend.stat("dir/a.txt"), "unavailable").then((found) => {
        error = found;
      }),
    );
    expect(error?.message).toMatch(/^stat ssh:dir\/a\.txt: timed out: no answer from /);
    expect(error?.message).toContain(`127.0.0.1:${proxy.port} within 400 ms`);
    expect(took).toBeLessThan(2_000);
    // Every later call fails at once. The connection was closed when the request timed out,
    // not after a goodbye the server can no longer acknowledge: closing does not wait either.
    expect(
      await timed(expectStorageError(backend.readFile("dir/a.txt"), "unavailable")),
    ).toBeLessThan(200);
    expect(await timed(backend.close())).toBeLessThan(500);
  });

  it("fails a write whose requests get no answer, without hanging", async () => {
    const { proxy, root } = await throughProxy();
    const backend = await openThrough(proxy, root, 400);
    await backend.writeFile("dir/a.txt", "a");
    proxy.stall();
    let error: Error | undefined;
    const took = await timed(
      expectStorageError(
        backend.writeFile("dir/a.txt", "replacement", { overwrite: true }),
        "unavailable",
      ).then((found) => {
        error = found;
      }),
    );
    expect(error?.message).toContain("write file ssh:dir/a.txt: timed out");
    expect(took).toBeLessThan(2_000);
  });

  it("lets an abort reach a request in flight", async () => {
    const { proxy, root } = await throughProxy();
    // The request timeout is far away: only the signal can end the wait.
    const backend = await openThrough(proxy, root, 20_000);
    await backend.writeFile("dir/a.txt", "a");
    proxy.stall();
    const reason = new Error("run interrupted");
    for (const call of [
      (signal: AbortSignal) => backend.stat("dir/a.txt", { signal }),
      (signal: AbortSignal) => backend.readFile("dir/a.txt", { signal }),
      (signal: AbortSignal) => backend.walk("", { recursive: true, limit: 10, signal }),
      (signal: AbortSignal) =>
        backend.deletePaths("dir", ["a.txt"], {
          signal,
          ifMatch: new Map([["a.txt", "1-1"]]),
        }),
    ]) {
      const controller = new AbortController();
      const running = call(controller.signal);
      setTimeout(() => controller.abort(reason), 100);
      const took = await timed(expect(running).rejects.toBe(reason));
      expect(took).toBeLessThan(1_000);
    }
    // A write aborted while it waits for an answer stops too; its clean-up, which the server
    // cannot answer, holds it up at most a short grace period.
    const controller = new AbortController();
    const writing = backend.writeFile("dir/b.txt", "b", { signal: controller.signal });
    setTimeout(() => controller.abort(reason), 100);
    expect(await timed(expect(writing).rejects.toBe(reason))).toBeLessThan(4_000);
    // Cancelling requests leaves the connection up; the proxy going away ends it.
    await proxy.close();
  });
});
