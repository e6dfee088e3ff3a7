import { execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, writeFile } from "node:fs/promises";
import { type AddressInfo, createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { promisify } from "node:util";
import type { StorageBackend } from "@distributor/storage";
import { expectStorageError } from "@distributor/storage/testing";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createSshBackend, fingerprint, hashHostName } from "../src/index.js";
import { generateKey, startSshd, type TestSshd } from "../src/testing/index.js";
import { backendOptions, freshRoot, server, sshd } from "./fixture.js";

const run = promisify(execFile);

/** A loopback server that accepts TCP connections and never says a word. */
async function silentServer(): Promise<{
  port: number;
  connections: () => number;
  close: () => Promise<void>;
}> {
  const sockets: Socket[] = [];
  const silent = createServer((socket) => sockets.push(socket));
  await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
  const port = (silent.address() as AddressInfo).port;
  return {
    port,
    connections: () => sockets.length,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    },
  };
}

describe.skipIf(sshd === null)("ssh backend", () => {
  let dir: string;
  const opened: StorageBackend[] = [];
  const servers: TestSshd[] = [];

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "distributor-ssh-"));
  });
  afterEach(async () => {
    for (const backend of opened.splice(0)) await backend.close();
    for (const started of servers.splice(0)) await started.stop();
    await rm(dir, { recursive: true, force: true });
  });

  const open = async (...args: Parameters<typeof backendOptions>) => {
    const backend = await createSshBackend(backendOptions(...args));
    opened.push(backend);
    return backend;
  };
  const ownServer = async (options: Parameters<typeof startSshd>[0] = {}) => {
    const started = await startSshd(options);
    servers.push(started);
    return started;
  };
  /** Backend options for a server of our own, whose host key a fresh known_hosts file trusts. */
  const ownOptions = async (own: Awaited<ReturnType<typeof ownServer>>, knownHosts: string) => {
    const knownHostsFile = join(dir, knownHosts);
    await writeFile(knownHostsFile, own.knownHostsLine);
    return {
      host: own.host,
      port: own.port,
      user: own.user,
      root: own.sftpRoot,
      authentication: {
        method: "private_key" as const,
        privateKey: await readFile(own.clientKeyFile),
      },
      knownHostsFile,
    };
  };

  it("names itself and the server it is rooted at", async () => {
    const root = await freshRoot();
    const backend = await open(root);
    expect(backend.name).toBe("ssh");
    expect(backend.location).toBe(`ssh:${server().user}@127.0.0.1:${server().port}${root}`);
  });

  it("serves a whole run over one connection", async () => {
    const own = await ownServer();
    const options = await ownOptions(own, "known_hosts");
    const started = performance.now();
    const backend = await createSshBackend({ ...options, maxRequests: 4 });
    const connectMs = performance.now() - started;
    opened.push(backend);
    const paths = Array.from({ length: 40 }, (_, index) => `d${index % 4}/f${index}.txt`);
    await Promise.all(paths.map((path) => backend.writeFile(path, path)));
    await Promise.all(paths.map((path) => backend.readFile(path)));
    expect(await backend.walk("", { recursive: true, limit: 100 })).toHaveLength(44);
    await backend.deletePrefix("");
    const accepted = own.log().match(/Accepted publickey/g) ?? [];
    expect(accepted).toHaveLength(1);
    console.info(`connection setup (TCP, key exchange, auth, SFTP): ${connectMs.toFixed(0)} ms`);

    // close ends the session on the server too.
    opened.splice(opened.indexOf(backend), 1);
    await backend.close();
    for (
      let attempt = 0;
      attempt < 100 && !/Disconnected from|Received disconnect/.test(own.log());
      attempt++
    ) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(own.log()).toMatch(/Disconnected from|Received disconnect/);
    await expectStorageError(backend.stat("d0/f0.txt"), "unavailable");
  });

  it("stops connecting as soon as its signal fires, and does not start on a fired one", {
    timeout: 10_000,
  }, async () => {
    const { port, connections, close } = await silentServer();
    try {
      const root = await freshRoot();
      const controller = new AbortController();
      // The handshake would wait 30 s for a server that never answers: longer than this test may.
      const opening = open(root, { port, connectTimeoutMs: 30_000, signal: controller.signal });
      setTimeout(() => controller.abort(new Error("run cancelled")), 100);
      await expect(opening).rejects.toThrow("run cancelled");
      const before = connections();
      await expect(
        open(root, { port, signal: AbortSignal.abort(new Error("cancelled before")) }),
      ).rejects.toThrow("cancelled before");
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(connections()).toBe(before);
    } finally {
      await close();
    }
  });

  it("lets exactly one of several compare-and-swaps of one version win", async () => {
    const root = await freshRoot();
    const backend = await open(root);
    const { version } = await backend.writeFile("state/.distributor.json", "v1");
    const attempts = await Promise.allSettled(
      Array.from({ length: 8 }, (_, index) =>
        backend.writeFile("state/.distributor.json", `v2 by ${index}`, { ifMatch: version }),
      ),
    );
    const winners = attempts.flatMap((attempt, index) =>
      attempt.status === "fulfilled" ? [index] : [],
    );
    expect(winners).toHaveLength(1);
    for (const attempt of attempts) {
      if (attempt.status === "rejected") expect(attempt.reason).toMatchObject({ kind: "conflict" });
    }
    expect(await readFile(join(root, "state", ".distributor.json"), "utf8")).toBe(
      `v2 by ${winners[0]}`,
    );
    expect(await readdir(join(root, "state"))).toEqual([".distributor.json"]);
  });

  describe("host keys", () => {
    it("strict: refuses an unknown host key, naming host, port and fingerprint, and writes nothing", async () => {
      const knownHostsFile = join(dir, "known_hosts");
      await writeFile(knownHostsFile, "# nothing trusted yet\n");
      const root = join(await freshRoot(), "never-created");
      const error = await expectStorageError(
        open(root, { knownHostsFile, hostKeyPolicy: "strict" }),
        "permission",
      );
      const hostKey = Buffer.from(server().knownHostsLine.trim().split(" ")[2] as string, "base64");
      expect(error.message).toContain(`host 127.0.0.1 port ${server().port}`);
      expect(error.message).toContain(fingerprint(hostKey));
      expect(error.message).toContain(knownHostsFile);
      expect(error.message).toContain("not in");
      expect(await readFile(knownHostsFile, "utf8")).toBe("# nothing trusted yet\n");
      await expect(stat(root)).rejects.toMatchObject({ code: "ENOENT" });
    });

    it("prints the fingerprint exactly as ssh-keygen -l does", async () => {
      const { stdout } = await run("ssh-keygen", ["-l", "-f", `${server().hostKeyFile}.pub`]);
      const printed = stdout.split(" ")[1];
      const hostKey = Buffer.from(server().knownHostsLine.trim().split(" ")[2] as string, "base64");
      expect(fingerprint(hostKey)).toBe(printed);
    });

    it("accept_new: records an unknown key atomically, then refuses a changed key", async () => {
      const first = await ownServer();
      const knownHostsFile = join(dir, "ssh", "known_hosts");
      const options = {
        host: first.host,
        port: first.port,
        user: first.user,
        root: first.sftpRoot,
        authentication: {
          method: "private_key" as const,
          privateKey: await readFile(first.clientKeyFile),
        },
        knownHostsFile,
        hostKeyPolicy: "accept_new" as const,
      };
      // A dry run trusts the key for its own session only.
      const dry = await createSshBackend({ ...options, dryRun: true });
      await dry.close();
      await expect(stat(knownHostsFile)).rejects.toMatchObject({ code: "ENOENT" });

      const backend = await createSshBackend(options);
      await backend.writeFile("a.txt", "recorded");
      await backend.close();
      expect(await readFile(knownHostsFile, "utf8")).toBe(first.knownHostsLine);
      // Now known: strict accepts it, and nothing is appended twice.
      await (await createSshBackend({ ...options, hostKeyPolicy: "strict" })).close();
      await (await createSshBackend(options)).close();
      expect(await readFile(knownHostsFile, "utf8")).toBe(first.knownHostsLine);
      expect((await readdir(join(dir, "ssh"))).sort()).toEqual(["known_hosts"]);

      // Same address, new host key: refused under accept_new too.
      await first.stop();
      servers.splice(servers.indexOf(first), 1);
      const second = await ownServer({ port: first.port });
      const error = await expectStorageError(
        createSshBackend({
          ...options,
          root: second.sftpRoot,
          authentication: {
            method: "private_key",
            privateKey: await readFile(second.clientKeyFile),
          },
        }),
        "permission",
      );
      expect(error.message).toContain("has changed");
      expect(error.message).toContain(`port ${first.port}`);
      expect(error.message).toContain(fingerprint(second.hostKey));
      expect(error.message).toContain(fingerprint(first.hostKey));
      expect(await readFile(knownHostsFile, "utf8")).toBe(first.knownHostsLine);
    });

    it("matches a hashed known_hosts entry", async () => {
      const [name, type, key] = server().knownHostsLine.trim().split(" ");
      const knownHostsFile = join(dir, "known_hosts");
      const hashed = `${hashHostName(name as string, randomBytes(20))} ${type} ${key}\n`;
      await writeFile(knownHostsFile, hashed);
      const backend = await open(await freshRoot(), { knownHostsFile });
      await backend.writeFile("x.txt", "x");
      expect(await readFile(knownHostsFile, "utf8")).toBe(hashed);
    });

    it("refuses a key marked @revoked", async () => {
      const [, type, key] = server().knownHostsLine.trim().split(" ");
      const knownHostsFile = join(dir, "known_hosts");
      await writeFile(knownHostsFile, `${server().knownHostsLine}@revoked * ${type} ${key}\n`);
      const error = await expectStorageError(
        open(await freshRoot(), { knownHostsFile, hostKeyPolicy: "accept_new" }),
        "permission",
      );
      expect(error.message).toContain("@revoked");
    });
  });

  describe("authentication", () => {
    it("fails with permission for a client key the server does not know", async () => {
      const other = join(dir, "other_key");
      await generateKey(other);
      const error = await expectStorageError(
        open(await freshRoot(), {
          authentication: { method: "private_key", privateKey: await readFile(other) },
        }),
        "permission",
      );
      expect(error.message).toContain("authentication failed");
      expect(error.message).toContain(`${server().user}@127.0.0.1:${server().port}`);
    });

    it("fails with permission for an encrypted key without its passphrase, leaving no connection open", async () => {
      const key = join(dir, "locked_key");
      await run("ssh-keygen", ["-q", "-t", "ed25519", "-N", "secret words", "-f", key]);
      const root = await freshRoot();
      const sockets = () =>
        process.getActiveResourcesInfo().filter((kind) => kind === "TCPSocketWrap").length;
      const before = sockets();
      await expectStorageError(
        open(root, {
          authentication: { method: "private_key", privateKey: await readFile(key) },
        }),
        "permission",
      );
      // ssh2 refuses the key before it takes the socket: that socket must not keep the process up
      // (a destroyed socket's handle closes on a later turn).
      for (let turn = 0; turn < 100 && sockets() > before; turn++) {
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      expect(sockets()).toBeLessThanOrEqual(before);
    });

    it("fails with permission for a password the server does not accept", async () => {
      await expectStorageError(
        open(await freshRoot(), { authentication: { method: "password", password: "nope" } }),
        "permission",
      );
    });

    it("authenticates through an SSH agent", async () => {
      const socket = join(dir, "agent.sock");
      const agent = spawn("ssh-agent", ["-D", "-a", socket], { stdio: "ignore" });
      try {
        for (let attempt = 0; attempt < 50; attempt++) {
          if (
            await stat(socket).then(
              () => true,
              () => false,
            )
          )
            break;
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        await run("ssh-add", [server().clientKeyFile], {
          env: { ...process.env, SSH_AUTH_SOCK: socket },
        });
        const backend = await open(await freshRoot(), {
          authentication: { method: "agent", socket },
        });
        await backend.writeFile("agent.txt", "via agent");
        expect(Buffer.from(await backend.readFile("agent.txt")).toString()).toBe("via agent");
      } finally {
        agent.kill();
      }
    });

    it("reports a missing agent as permission, naming the settings to use", async () => {
      const error = await expectStorageError(
        open(await freshRoot(), { authentication: { method: "agent", socket: "" } }),
        "permission",
      );
      expect(error.message).toContain("SSH_AUTH_SOCK");
    });

    it("reports a refused connection as unavailable", async () => {
      const { freePort } = await import("../src/testing/index.js");
      const port = await freePort();
      const error = await expectStorageError(open(await freshRoot(), { port }), "unavailable");
      expect(error.message).toContain(`:${port}`);
    });

    it("reports a port no socket can connect to as unavailable, naming it", async () => {
      const error = await expectStorageError(
        open(await freshRoot(), { port: 70_000 }),
        "unavailable",
      );
      expect(error.message).toContain("cannot connect");
      expect(error.message).toContain(":70000");
    });
  });

  describe("symlinks and odd names", () => {
    it("refuses a symlinked ancestor for every operation and never follows it", async () => {
      const root = await freshRoot();
      const outside = join(dir, "outside");
      await mkdir(outside);
      await writeFile(join(outside, "secret.txt"), "outside bytes");
      await symlink(outside, join(root, "link"));
      const backend = await open(root);
      for (const call of [
        () => backend.readFile("link/secret.txt"),
        () => backend.openRead("link/secret.txt"),
        () => backend.stat("link/secret.txt"),
        () => backend.writeFile("link/new.txt", "x"),
        () => backend.writeFile("link/secret.txt", "x", { overwrite: true }),
        () => backend.deletePaths("link", ["secret.txt"]),
        () => backend.deletePrefix("link/secret.txt"),
        () => backend.walk("link", { recursive: true, limit: 10 }),
      ]) {
        const error = await expectStorageError(call(), "unsupported");
        expect(error.message).toContain('"link" is a symlink');
      }
      expect(await readdir(outside)).toEqual(["secret.txt"]);
      expect(await readFile(join(outside, "secret.txt"), "utf8")).toBe("outside bytes");
    });

    it("refuses a symlinked file and lists symlinks without following them", async () => {
      const root = await freshRoot();
      await writeFile(join(dir, "target.txt"), "outside");
      await symlink(join(dir, "target.txt"), join(root, "file-link.txt"));
      const backend = await open(root);
      await expectStorageError(backend.readFile("file-link.txt"), "unsupported");
      await expectStorageError(
        backend.writeFile("file-link.txt", "x", { overwrite: true }),
        "unsupported",
      );
      expect(await backend.walk("", { recursive: true, limit: 10 })).toMatchObject([
        { path: "file-link.txt", kind: "symlink", size: 0 },
      ]);
      // deletePrefix("") removes the link itself, never its target.
      await backend.deletePrefix("");
      expect(await readFile(join(dir, "target.txt"), "utf8")).toBe("outside");
    });

    it("refuses a directory replaced by a symlink after the cache forgot it", async () => {
      const root = await freshRoot();
      const backend = await open(root);
      await backend.writeFile("site/a.txt", "a");
      await backend.deletePrefix("site");
      await symlink(dir, join(root, "site"));
      await expectStorageError(backend.writeFile("site/b.txt", "b"), "unsupported");
      expect(await readdir(dir)).not.toContain("b.txt");
    });

    it("escapes names that are not logical paths and reports their problem", async () => {
      const root = await freshRoot();
      await writeFile(join(root, "bad\u0001name"), "c");
      await writeFile(join(root, "back\\slash"), "b");
      await writeFile(Buffer.concat([Buffer.from(`${root}/`), Buffer.from([0x6e, 0xff])]), "n");
      const backend = await open(root);
      const entries = await backend.walk("", { limit: 10 });
      expect(entries.map((entry) => [entry.path, entry.nameProblem !== undefined])).toEqual([
        ["back\\\\slash", true],
        ["bad\\x01name", true],
        ["n\\ufffd", true],
      ]);
      for (const entry of entries) expect(entry.path).toContain("\\");
    });
  });

  describe("failures", () => {
    it("leaves no directory behind when writes that made it fail side by side", async () => {
      const root = await freshRoot();
      const backend = await open(root);
      const gates = Array.from({ length: 4 }, () => {
        let fail: () => void = () => undefined;
        const failed = new Promise<void>((resolve) => {
          fail = resolve;
        });
        async function* source(): AsyncGenerator<Uint8Array> {
          yield Buffer.from("partial");
          await failed;
          throw new Error("source failed");
        }
        return { source: source(), fail };
      });
      const started = (index: number) =>
        backend.writeFile(`fresh/deep/${index}.txt`, gates[index]!.source).then(
          () => "written",
          () => "failed",
        );
      const temps = async (count: number) => {
        for (;;) {
          const names = await readdir(join(root, "fresh", "deep")).catch(() => []);
          if (names.length === count) return;
          await new Promise((resolve) => setTimeout(resolve, 2));
        }
      };
      // Write 0 makes both directories, then the others join it; it fails first.
      const writes = [started(0)];
      await temps(1);
      for (let index = 1; index < gates.length; index++) writes.push(started(index));
      await temps(gates.length);
      for (const [index, { fail }] of gates.entries()) {
        fail();
        expect(await writes[index]).toBe("failed");
      }
      expect(await readdir(root)).toEqual([]);
      // A later write makes the directories again and keeps them under its output.
      await backend.writeFile("fresh/deep/0.txt", "done");
      expect(await readdir(join(root, "fresh", "deep"))).toEqual(["0.txt"]);
    });

    it("removes its temp file when the commit fails: a racing creator wins a no-clobber write", async () => {
      const root = await freshRoot();
      const backend = await open(root);
      await backend.writeFile("dir/x.txt", "x");
      let pulls = 0;
      const source = new Readable({
        read() {
          pulls++;
          if (pulls === 1) this.push(Buffer.from("ours"));
          else {
            // Someone else creates the target while our bytes are still streaming.
            writeFile(join(root, "dir", "y.txt"), "theirs").then(() => this.push(null));
          }
        },
      });
      await expectStorageError(backend.writeFile("dir/y.txt", source), "already_exists");
      expect((await readdir(join(root, "dir"))).sort()).toEqual(["x.txt", "y.txt"]);
      expect(await readFile(join(root, "dir", "y.txt"), "utf8")).toBe("theirs");
    });

    it("fails a write from a ByteReader with unavailable, without hanging, when sshd is killed", async () => {
      const own = await ownServer();
      const backend = await createSshBackend(await ownOptions(own, "known_hosts_reader"));
      let reads = 0;
      let closed = false;
      // A source that never ends: only the lost connection can stop the write.
      const reader = {
        async read(into: Uint8Array) {
          reads++;
          if (reads === 20) own.kill().catch(() => undefined);
          into.fill(1);
          await new Promise((resolve) => setTimeout(resolve, 1));
          return into.length;
        },
        close() {
          closed = true;
        },
      };
      const started = Date.now();
      const error = await expectStorageError(
        backend.writeFile("big/reader.bin", reader),
        "unavailable",
      );
      expect(Date.now() - started).toBeLessThan(10_000);
      expect(error.message).toContain(`connection to ${own.user}@127.0.0.1:${own.port} was lost`);
      expect(closed).toBe(true);
      await backend.close();
    }, 30_000);

    it("fails the running write with unavailable when sshd is killed, and the next run recovers", async () => {
      const own = await ownServer();
      const options = await ownOptions(own, "known_hosts");
      const backend = await createSshBackend(options);
      let sent = 0;
      const source = new Readable({
        read() {
          sent++;
          if (sent <= 4) this.push(Buffer.alloc(256 * 1024, 1));
          else if (sent === 5) own.kill().catch(() => undefined);
        },
      });
      const started = Date.now();
      const error = await expectStorageError(
        backend.writeFile("big/file.bin", source),
        "unavailable",
      );
      expect(Date.now() - started).toBeLessThan(10_000);
      expect(error.message).toContain(`connection to ${own.user}@127.0.0.1:${own.port} was lost`);
      expect(error.path).toBe("big/file.bin");
      // Every later call fails the same way instead of hanging.
      await expectStorageError(backend.stat("big/file.bin"), "unavailable");
      await backend.close();

      // The server comes back: the target never appeared; the temp file the crash left is the
      // reserved name that the commit protocol's recovery deletes.
      const again = await startSshd({
        port: own.port,
        hostKeyFile: own.hostKeyFile,
        directory: own.directory,
      });
      servers.push(again);
      const next = await createSshBackend(options);
      const left = await next.walk("", { recursive: true, limit: 10 });
      for (const entry of left.filter((listed) => listed.kind === "file")) {
        expect(entry.path).toMatch(/^big\/\.distributor\.[0-9a-f]{16}\.tmp$/);
      }
      await expectStorageError(next.stat("big/file.bin"), "not_found");
      await next.writeFile("big/file.bin", "recovered");
      expect(Buffer.from(await next.readFile("big/file.bin")).toString()).toBe("recovered");
      await next.close();
    });

    it("fails a request the server does not answer in time with unavailable", async () => {
      const own = await ownServer();
      const backend = await createSshBackend({
        ...(await ownOptions(own, "known_hosts")),
        operationTimeoutMs: 1_000,
      });
      opened.push(backend);
      await backend.writeFile("a.txt", "a");
      // The connection stays open, but nothing answers.
      await own.suspendConnections();
      try {
        const started = Date.now();
        const error = await expectStorageError(backend.stat("a.txt"), "unavailable");
        expect(Date.now() - started).toBeLessThan(5_000);
        expect(error.message).toContain("timed out: no answer from");
        expect(error.message).toContain("within 1 s");
        await expectStorageError(backend.readFile("a.txt"), "unavailable");
        // The server never closes its end either: closing the backend must not wait for it,
        // or a run would hang at its very end.
        const closed = await Promise.race([
          backend.close().then(() => "closed"),
          new Promise((resolve) => setTimeout(resolve, 15_000, "still waiting")),
        ]);
        expect(closed).toBe("closed");
      } finally {
        await own.resumeConnections();
      }
    }, 30_000);
  });
});
