import type { Socket } from "node:net";
import type { SFTPWrapper } from "ssh2";
import type SftpClient from "ssh2-sftp-client";

/** How long closing waits for the server to close its side of the connection. */
const CLOSE_GRACE_MS = 5_000;

/** Why a session can no longer serve requests. */
export class SessionLost extends Error {
  override readonly name = "SessionLost";
}

/**
 * The SFTP channels of one SSH connection, shared by every operation of a backend. OpenSSH's
 * sftp-server answers the requests of one channel strictly one after another (an fsync holds up
 * everything behind it), so the session spreads work over a few channels of the same connection;
 * a request that uses a handle goes to the channel (`lane`) that opened it. At most
 * `maxRequests` requests are outstanding at once (more wait their turn), each must be answered
 * within `timeoutMs`, and once the connection drops every waiting and later request fails with
 * `SessionLost` naming the cause.
 */
export class Session {
  readonly #client: SftpClient;
  readonly #socket: Socket | undefined;
  readonly #channels: SFTPWrapper[];
  readonly #load: number[];
  readonly #label: string;
  readonly #maxRequests: number;
  readonly #timeoutMs: number;
  #active = 0;
  readonly #waiting: ((granted: boolean) => void)[] = [];
  #lost: SessionLost | undefined;
  #closing = false;
  readonly #failures = new Set<(error: SessionLost) => void>();

  constructor(
    client: SftpClient,
    channels: SFTPWrapper[],
    options: { label: string; maxRequests: number; timeoutMs: number; socket?: Socket },
  ) {
    this.#client = client;
    this.#socket = options.socket;
    this.#channels = channels;
    this.#load = channels.map(() => 0);
    this.#label = options.label;
    this.#maxRequests = options.maxRequests;
    this.#timeoutMs = options.timeoutMs;
    const onGone = (cause?: unknown) => {
      if (this.#closing) return;
      const detail = cause instanceof Error ? `: ${cause.message}` : "";
      this.#lose(new SessionLost(`connection to ${this.#label} was lost${detail}`));
    };
    client.on("error", onGone);
    client.on("close", () => onGone());
    client.on("end", () => onGone());
    this.#onGone = onGone;
    for (const sftp of channels) sftp.on("close", () => onGone());
  }

  readonly #onGone: () => void;

  /** Adds a channel opened after the session started serving requests. */
  addChannel(sftp: SFTPWrapper): void {
    if (this.#lost !== undefined) {
      sftp.end();
      return;
    }
    sftp.on("close", () => this.#onGone());
    this.#channels.push(sftp);
    this.#load.push(0);
  }

  /** The channel with the least work in flight, for an operation to keep its handles on. */
  lane(): number {
    let best = 0;
    for (let index = 1; index < this.#load.length; index++) {
      if ((this.#load[index] as number) < (this.#load[best] as number)) best = index;
    }
    return best;
  }

  /** The failure that ended the session, if it ended other than by `close`. */
  get lost(): SessionLost | undefined {
    return this.#lost;
  }

  /**
   * Calls `listener` once if the session is lost while subscribed (at once when it already is),
   * so work that is not waiting on a request (a write waiting on its source) stops too.
   */
  onLost(listener: (error: SessionLost) => void): () => void {
    if (this.#lost !== undefined) {
      listener(this.#lost);
      return () => undefined;
    }
    this.#failures.add(listener);
    return () => this.#failures.delete(listener);
  }

  /** Whether the server offers an SFTP extension (e.g. `posix-rename@openssh.com`). */
  supports(extension: string): boolean {
    const extensions = (this.#channels[0] as unknown as { _extensions?: Record<string, string> })
      ._extensions;
    return extensions?.[extension] !== undefined;
  }

  /** Largest data length one WRITE / READ request carries, as the server's limits allow. */
  get maxWriteLength(): number {
    return (this.#channels[0] as unknown as { _maxWriteLen?: number })._maxWriteLen ?? 32 * 1024;
  }

  get maxReadLength(): number {
    return (this.#channels[0] as unknown as { _maxReadLen?: number })._maxReadLen ?? 32 * 1024;
  }

  /**
   * Sends one request on channel `lane` (default: the least busy). `send` receives the raw
   * wrapper and a node-style callback; the promise settles with the server's answer, a timeout,
   * or the loss of the connection.
   */
  async request<T>(
    send: (sftp: SFTPWrapper, done: (error: unknown, value?: T) => void) => void,
    lane?: number,
  ) {
    await this.#acquire();
    const channel = lane ?? this.lane();
    this.#load[channel] = (this.#load[channel] as number) + 1;
    try {
      return await new Promise<T>((resolve, reject) => {
        if (this.#lost !== undefined) {
          reject(this.#lost);
          return;
        }
        let settled = false;
        const finish = (error: unknown, value?: T) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          this.#failures.delete(fail);
          if (error !== undefined && error !== null) {
            reject(this.#lost ?? error);
          } else {
            resolve(value as T);
          }
        };
        const fail = (error: SessionLost) => finish(error);
        const timer = setTimeout(() => {
          // A server that stops answering leaves the session in an unknown state: end it, so
          // every other request fails fast instead of waiting for its own timeout.
          this.#lose(
            new SessionLost(
              `no answer from ${this.#label} within ${Math.round(this.#timeoutMs / 1000)}s; the connection was closed`,
            ),
          );
          void this.#endConnection();
        }, this.#timeoutMs);
        this.#failures.add(fail);
        try {
          send(this.#channels[channel] as SFTPWrapper, finish);
        } catch (error) {
          finish(error);
        }
      });
    } finally {
      this.#load[channel] = (this.#load[channel] as number) - 1;
      this.#release();
    }
  }

  /** Ends the session; requests still running fail as lost. */
  async close(): Promise<void> {
    if (this.#closing) return;
    this.#closing = true;
    this.#lose(new SessionLost(`the session to ${this.#label} was closed`));
    await this.#endConnection();
  }

  /**
   * Says goodbye (SSH disconnect, then the end of the TCP stream) and waits for the server to
   * close its side, at most `CLOSE_GRACE_MS`: a server that stopped answering never does, and the
   * open socket would keep the process running.
   */
  async #endConnection(): Promise<void> {
    const socket = this.#socket;
    const timer =
      socket === undefined ? undefined : setTimeout(() => socket.destroy(), CLOSE_GRACE_MS);
    try {
      await this.#client.end().catch(() => undefined);
    } finally {
      clearTimeout(timer);
    }
  }

  #lose(error: SessionLost): void {
    if (this.#lost !== undefined) return;
    this.#lost = error;
    for (const fail of [...this.#failures]) fail(error);
    for (const wake of this.#waiting.splice(0)) wake(false);
  }

  /** Takes a request slot; a released slot passes straight to the next waiter. */
  async #acquire(): Promise<void> {
    if (this.#lost !== undefined) throw this.#lost;
    if (this.#active < this.#maxRequests) {
      this.#active++;
      return;
    }
    const granted = await new Promise<boolean>((resolve) => this.#waiting.push(resolve));
    if (!granted) throw this.#lost ?? new SessionLost(`the session to ${this.#label} ended`);
  }

  #release(): void {
    const next = this.#waiting.shift();
    if (next !== undefined) next(true);
    else this.#active--;
  }
}
