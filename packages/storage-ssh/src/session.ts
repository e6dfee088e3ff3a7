import type { Socket } from "node:net";
import type { SFTPWrapper } from "ssh2";
import type SftpClient from "ssh2-sftp-client";

/** How long closing waits for the server to close its side of the connection. */
const CLOSE_GRACE_MS = 5_000;

/**
 * The SFTP extensions the backend uses, with the version ssh2 implements of each: ssh2 refuses
 * to send one the server advertised at another version, so only that version counts as offered.
 */
export const SFTP_EXTENSIONS = {
  posixRename: ["posix-rename@openssh.com", "1"],
  hardlink: ["hardlink@openssh.com", "1"],
  fsync: ["fsync@openssh.com", "1"],
} as const;

export type SftpExtension = keyof typeof SFTP_EXTENSIONS;

/** `500 ms`, `1.5 s`, `30 s`: a duration as messages show it. */
export function formatDuration(ms: number): string {
  return ms < 1000 ? `${ms} ms` : `${ms / 1000} s`;
}

/**
 * One operation's abort signal as requests see it: a single listener on the caller's signal,
 * however many requests the operation has in flight (Node warns past ten listeners).
 */
export class Cancellation {
  readonly #callbacks = new Set<() => void>();
  readonly #onAbort = () => {
    for (const callback of [...this.#callbacks]) callback();
  };

  /** Until when clean-up after the cancellation is waited for (see `Remote.cleanUp`). */
  cleanUpDeadline: number | undefined;

  constructor(readonly signal: AbortSignal) {}

  /** Calls `callback` if the signal fires before the returned function is called. */
  watch(callback: () => void): () => void {
    if (this.#callbacks.size === 0) {
      this.signal.addEventListener("abort", this.#onAbort, { once: true });
    }
    this.#callbacks.add(callback);
    return () => {
      if (!this.#callbacks.delete(callback)) return;
      if (this.#callbacks.size === 0) this.signal.removeEventListener("abort", this.#onAbort);
    };
  }
}

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
 * within `timeoutMs` (else the connection is closed at once: a server that stopped answering will
 * not answer a goodbye either), a cancelled operation stops waiting for its requests, and once the
 * connection drops every waiting and later request fails with `SessionLost` naming the cause.
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
  /** Settles once the socket has closed (ssh2 may report the close before anyone asks). */
  readonly #socketClosed: Promise<void> | undefined;
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
    const socket = options.socket;
    this.#socketClosed =
      socket === undefined
        ? undefined
        : new Promise((resolve) => {
            if (socket.destroyed) resolve();
            else socket.once("close", () => resolve());
          });
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

  /**
   * Whether the server offers an SFTP extension at the version ssh2 speaks. ssh2 keeps what the
   * server's VERSION packet advertised (name to version) in the channel's `_extensions`; it has
   * no public accessor, and ssh2-sftp-client exposes none either.
   */
  supports(extension: SftpExtension): boolean {
    const [name, version] = SFTP_EXTENSIONS[extension];
    const extensions = (this.#channels[0] as unknown as { _extensions?: Record<string, string> })
      ._extensions;
    return extensions?.[name] === version;
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
   * the loss of the connection, or (with `cancel`) the operation's abort reason. A request
   * cancelled after it was sent is still carried out by the server; its answer is dropped.
   */
  async request<T>(
    send: (sftp: SFTPWrapper, done: (error: unknown, value?: T) => void) => void,
    lane?: number,
    cancel?: Cancellation,
  ) {
    cancel?.signal.throwIfAborted();
    await this.#acquire(cancel);
    const channel = lane ?? this.lane();
    this.#load[channel] = (this.#load[channel] as number) + 1;
    try {
      return await new Promise<T>((resolve, reject) => {
        if (this.#lost !== undefined) {
          reject(this.#lost);
          return;
        }
        if (cancel?.signal.aborted) {
          reject(cancel.signal.reason);
          return;
        }
        let settled = false;
        let stopWatching: (() => void) | undefined;
        const finish = (error: unknown, value?: T) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          this.#failures.delete(fail);
          stopWatching?.();
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
              `timed out: no answer from ${this.#label} within ${formatDuration(this.#timeoutMs)} (timeouts.request); the connection was closed`,
            ),
          );
          this.#socket?.destroy();
          void this.#endConnection();
        }, this.#timeoutMs);
        this.#failures.add(fail);
        stopWatching = cancel?.watch(() => {
          settled = true;
          clearTimeout(timer);
          this.#failures.delete(fail);
          reject(cancel.signal.reason);
        });
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
   * Says goodbye (SSH disconnect, then the end of the TCP stream) and waits for the socket to
   * close, at most `CLOSE_GRACE_MS`: a server that stopped answering never closes its side, and
   * the open socket would keep the process running. A socket already closed needs no goodbye.
   */
  async #endConnection(): Promise<void> {
    const socket = this.#socket;
    const closed = this.#socketClosed;
    if (socket === undefined || closed === undefined) {
      await this.#client.end().catch(() => undefined);
      return;
    }
    if (socket.destroyed) return;
    const timer = setTimeout(() => socket.destroy(), CLOSE_GRACE_MS);
    // Its promise waits for a close event that may already have passed: the socket's is awaited.
    this.#client.end().catch(() => undefined);
    await closed;
    clearTimeout(timer);
  }

  #lose(error: SessionLost): void {
    if (this.#lost !== undefined) return;
    this.#lost = error;
    for (const fail of [...this.#failures]) fail(error);
    for (const wake of this.#waiting.splice(0)) wake(false);
  }

  /** Takes a request slot; a released slot passes straight to the next waiter. */
  async #acquire(cancel: Cancellation | undefined): Promise<void> {
    if (this.#lost !== undefined) throw this.#lost;
    if (this.#active < this.#maxRequests) {
      this.#active++;
      return;
    }
    const granted = await new Promise<boolean | "cancelled">((resolve) => {
      let stopWatching: (() => void) | undefined;
      const wake = (granted: boolean) => {
        stopWatching?.();
        resolve(granted);
      };
      this.#waiting.push(wake);
      stopWatching = cancel?.watch(() => {
        const index = this.#waiting.indexOf(wake);
        if (index !== -1) this.#waiting.splice(index, 1);
        resolve("cancelled");
      });
    });
    if (granted === "cancelled") throw cancel?.signal.reason;
    if (!granted) throw this.#lost ?? new SessionLost(`the session to ${this.#label} ended`);
  }

  #release(): void {
    const next = this.#waiting.shift();
    if (next !== undefined) next(true);
    else this.#active--;
  }
}
