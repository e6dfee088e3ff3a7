import { type ChildProcess, execFile, spawn } from "node:child_process";
import {
  access,
  constants,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  rm,
  writeFile,
} from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/** sshd could not be started here (not installed, no privilege separation directory, ...). */
export class SshdUnavailable extends Error {
  override readonly name = "SshdUnavailable";
}

/** A throwaway OpenSSH server on loopback, for tests. */
export interface TestSshd {
  host: string;
  port: number;
  /** The local user the server lets in with `clientKeyFile`. */
  user: string;
  /** Temp directory holding keys, config and `sftpRoot`; removed by `stop`. */
  directory: string;
  /** An empty directory on the server, for backends to use below. */
  sftpRoot: string;
  clientKeyFile: string;
  hostKeyFile: string;
  /** The `known_hosts` line that trusts this server's host key. */
  knownHostsLine: string;
  /** The raw host public key blob. */
  hostKey: Buffer;
  /** Stops the server and its connection processes, and removes `directory`. */
  stop(): Promise<void>;
  /** Kills the server and every connection process at once, as a crash would. */
  kill(): Promise<void>;
  /** What sshd has logged so far (`-e`: its log goes to stderr). */
  log(): string;
  /** Stops (SIGSTOP) the connection processes: sockets stay open, nothing answers. */
  suspendConnections(): Promise<void>;
  resumeConnections(): Promise<void>;
}

export interface StartSshdOptions {
  /** Port to listen on (default: a free one). */
  port?: number;
  /** Reuse a host key (a `ssh-keygen` private key file) instead of generating one. */
  hostKeyFile?: string;
  /** Directory for keys, config and the sftp root (default: a new temp directory). */
  directory?: string;
  /**
   * The command sshd runs for the `sftp` subsystem, as a `Subsystem` line takes it (default
   * `internal-sftp`): for instance one that never answers.
   */
  sftpSubsystem?: string;
  /**
   * SFTP extensions (`hardlink@openssh.com`, ...) the server must not advertise: OpenSSH's
   * `sftp-server` then runs behind a small filter that drops them from its VERSION packet, as a
   * server without them would send it. Ignored when `sftpSubsystem` is set.
   */
  hideSftpExtensions?: readonly string[];
}

const SFTP_SERVER_CANDIDATES = [
  "/usr/lib/openssh/sftp-server",
  "/usr/libexec/openssh/sftp-server",
  "/usr/libexec/sftp-server",
  "/usr/lib/ssh/sftp-server",
];

/**
 * Runs sftp-server (argv[2]) and passes its bytes through both ways, except that the extensions
 * named in argv[3] (comma-separated) are dropped from its first packet, SSH_FXP_VERSION:
 * uint32 length, byte type, uint32 version, then (string name, string data) pairs.
 */
const EXTENSION_FILTER = `import { spawn } from "node:child_process";
const [server, hidden] = process.argv.slice(2);
const hide = new Set(hidden.split(","));
const child = spawn(server, [], { stdio: ["pipe", "pipe", "inherit"] });
process.stdin.pipe(child.stdin);
let head = Buffer.alloc(0);
let filtered = false;
child.stdout.on("data", (chunk) => {
  if (filtered) {
    process.stdout.write(chunk);
    return;
  }
  head = Buffer.concat([head, chunk]);
  if (head.length < 4 || head.length < 4 + head.readUInt32BE(0)) return;
  const end = 4 + head.readUInt32BE(0);
  const kept = [head.subarray(4, 9)];
  for (let at = 9; at < end; ) {
    const nameEnd = at + 4 + head.readUInt32BE(at);
    const dataEnd = nameEnd + 4 + head.readUInt32BE(nameEnd);
    if (!hide.has(head.toString("utf8", at + 4, nameEnd))) kept.push(head.subarray(at, dataEnd));
    at = dataEnd;
  }
  const body = Buffer.concat(kept);
  const length = Buffer.alloc(4);
  length.writeUInt32BE(body.length);
  process.stdout.write(Buffer.concat([length, body, head.subarray(end)]));
  filtered = true;
});
child.stdout.on("end", () => process.stdout.end());
child.on("exit", (code) => {
  process.exitCode = code ?? 1;
});
`;

function shellQuote(word: string): string {
  return `'${word.replaceAll("'", "'\\''")}'`;
}

/** The `Subsystem sftp` command for these options. */
async function sftpSubsystem(options: StartSshdOptions, directory: string): Promise<string> {
  if (options.sftpSubsystem !== undefined) return options.sftpSubsystem;
  const hidden = options.hideSftpExtensions ?? [];
  if (hidden.length === 0) return "internal-sftp";
  let server: string | undefined;
  for (const candidate of SFTP_SERVER_CANDIDATES) {
    try {
      await access(candidate, constants.X_OK);
      server = candidate;
      break;
    } catch {}
  }
  if (server === undefined) {
    throw new SshdUnavailable(
      `no sftp-server binary found (looked in ${SFTP_SERVER_CANDIDATES.join(", ")})`,
    );
  }
  const filter = join(directory, "sftp-extension-filter.mjs");
  await writeFile(filter, EXTENSION_FILTER);
  return [process.execPath, filter, server, hidden.join(",")].map(shellQuote).join(" ");
}

const SSHD_CANDIDATES = ["/usr/sbin/sshd", "/usr/local/sbin/sshd", "/sbin/sshd"];

/** The sshd binary: `$SSHD` when set (and then only that), else PATH and the usual sbin places. */
async function findSshd(): Promise<string> {
  const chosen = process.env.SSHD;
  if (chosen !== undefined && chosen !== "") {
    try {
      await access(chosen, constants.X_OK);
      return chosen;
    } catch {
      throw new SshdUnavailable(`SSHD=${chosen} is not an executable sshd`);
    }
  }
  const fromPath = (process.env.PATH ?? "").split(":").map((dir) => join(dir, "sshd"));
  for (const candidate of [...fromPath, ...SSHD_CANDIDATES]) {
    try {
      await access(candidate, constants.X_OK);
      return candidate;
    } catch {}
  }
  throw new SshdUnavailable(
    "sshd is not installed (Debian: apt-get install -y openssh-server); the SSH tests need a real OpenSSH server",
  );
}

/** Generates an unencrypted ed25519 key pair at `file` / `file.pub`. */
export async function generateKey(file: string): Promise<void> {
  await run("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "distributor-test", "-f", file]);
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** Starts `sshd -D -e` as a child process with generated keys; resolves once it listens. */
export async function startSshd(options: StartSshdOptions = {}): Promise<TestSshd> {
  const sshd = await findSshd();
  if (process.getuid?.() === 0) {
    // sshd refuses to start as root without its privilege separation directory.
    await mkdir("/run/sshd", { recursive: true, mode: 0o755 }).catch(() => undefined);
  }
  const directory = options.directory ?? (await mkdtemp(join(tmpdir(), "distributor-sshd-")));
  const sftpRoot = join(directory, "sftp");
  await mkdir(sftpRoot, { recursive: true });
  const hostKeyFile = options.hostKeyFile ?? join(directory, "host_key");
  if (options.hostKeyFile === undefined) await generateKey(hostKeyFile);
  const clientKeyFile = join(directory, "client_key");
  await access(clientKeyFile).catch(() => generateKey(clientKeyFile));
  await writeFile(join(directory, "authorized_keys"), await readFile(`${clientKeyFile}.pub`));
  const port = options.port ?? (await freePort());
  const config = join(directory, "sshd_config");
  await writeFile(
    config,
    [
      `Port ${port}`,
      "ListenAddress 127.0.0.1",
      `HostKey ${hostKeyFile}`,
      `PidFile ${join(directory, "sshd.pid")}`,
      `AuthorizedKeysFile ${join(directory, "authorized_keys")}`,
      "PubkeyAuthentication yes",
      "PasswordAuthentication no",
      "KbdInteractiveAuthentication no",
      "PermitRootLogin prohibit-password",
      "UsePAM no",
      "StrictModes no",
      "MaxStartups 64",
      "MaxSessions 64",
      `Subsystem sftp ${await sftpSubsystem(options, directory)}`,
      "",
    ].join("\n"),
  );
  const publicKey = (await readFile(`${hostKeyFile}.pub`, "utf8")).trim().split(/\s+/);
  const hostKey = Buffer.from(publicKey[1] ?? "", "base64");
  const child = spawn(sshd, ["-D", "-e", "-f", config], { stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  await waitUntilListening(child, port, (text) => {
    log += text;
  });
  let stopped = false;
  const stopAll = async (signal: NodeJS.Signals) => {
    if (stopped) return;
    stopped = true;
    const pid = child.pid;
    const exited = new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) resolve();
      else child.once("exit", () => resolve());
    });
    if (pid !== undefined) {
      for (const descendant of await descendantsOf(pid)) {
        try {
          process.kill(descendant, signal);
          process.kill(descendant, "SIGCONT");
        } catch {}
      }
    }
    child.kill(signal);
    await exited;
  };
  const signalConnections = async (signal: NodeJS.Signals) => {
    if (child.pid === undefined) return;
    for (const descendant of await descendantsOf(child.pid)) {
      try {
        process.kill(descendant, signal);
      } catch {}
    }
  };
  return {
    host: "127.0.0.1",
    port,
    user: userInfo().username,
    directory,
    sftpRoot,
    clientKeyFile,
    hostKeyFile,
    hostKey,
    knownHostsLine: `[127.0.0.1]:${port} ${publicKey[0]} ${publicKey[1]}\n`,
    async stop() {
      await stopAll("SIGTERM");
      if (options.directory === undefined) await rm(directory, { recursive: true, force: true });
    },
    async kill() {
      await stopAll("SIGKILL");
    },
    log: () => log,
    async suspendConnections() {
      await signalConnections("SIGSTOP");
    },
    async resumeConnections() {
      await signalConnections("SIGCONT");
    },
  };
}

function waitUntilListening(
  child: ChildProcess,
  port: number,
  onOutput: (text: string) => void,
): Promise<void> {
  return new Promise((resolve, reject) => {
    let output = "";
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new SshdUnavailable(`sshd did not listen on port ${port} within 10s:\n${output}`));
    }, 10_000);
    child.stderr?.setEncoding("utf8").on("data", (text: string) => {
      output += text;
      onOutput(text);
      if (output.includes(`Server listening on 127.0.0.1 port ${port}`)) {
        clearTimeout(timer);
        // Keep draining stderr so sshd never blocks on a full pipe.
        resolve();
      }
    });
    child.once("error", (error) => {
      clearTimeout(timer);
      reject(new SshdUnavailable(`sshd could not be started: ${error.message}`));
    });
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new SshdUnavailable(`sshd exited (${signal ?? code}) before listening:\n${output}`));
    });
  });
}

/**
 * Processes below `pid`: connection children of sshd start their own sessions, so a signal to
 * the process group would miss them; they are found through `/proc` instead.
 */
async function descendantsOf(pid: number): Promise<number[]> {
  const parents = new Map<number, number[]>();
  for (const name of await readdir("/proc").catch(() => [] as string[])) {
    if (!/^\d+$/.test(name)) continue;
    const stat = await readFile(`/proc/${name}/stat`, "utf8").catch(() => "");
    // Field 4 (after the parenthesised command name, which may hold spaces) is the parent pid.
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    if (!Number.isFinite(ppid)) continue;
    parents.set(ppid, [...(parents.get(ppid) ?? []), Number(name)]);
  }
  const found: number[] = [];
  const pending = [pid];
  while (pending.length > 0) {
    const current = pending.pop() as number;
    for (const childPid of parents.get(current) ?? []) {
      found.push(childPid);
      pending.push(childPid);
    }
  }
  return found;
}
