import type { Socket } from "node:net";
import { performance } from "node:perf_hooks";

/** How the proxy shapes a connection's traffic. */
export interface Shape {
  delayMs: number;
  bytesPerSecond: number | undefined;
  /** Bytes a lane holds before it pauses its source, as a full TCP window would. */
  backlogLimit: number;
}

/** Resets rather than closes, so the peer sees ECONNRESET as from a server that went away. */
export function resetSocket(socket: Socket): void {
  if (socket.destroyed) return;
  // Not connected, or already shut down for writing (libuv refuses to reset it then, and the
  // socket would never close): a plain close.
  if (socket.connecting || socket.pending || socket.writableEnded) socket.destroy();
  else socket.resetAndDestroy();
}

type Carried = { due: number; bytes: Buffer } | { due: number; act: () => void };

/**
 * One direction of a connection: every chunk leaves `delayMs` after it arrived (after its
 * serialization time too, under a bandwidth cap), in arrival order. Due times never decrease and
 * only the head of the queue waits on a timer, so nothing is ever reordered.
 */
export class Lane {
  private queue: Carried[] = [];
  private queued = 0;
  /** When the capped link has sent everything queued so far. */
  private lineFreeAt = 0;
  private timer: NodeJS.Timeout | undefined;
  private blocked = false;
  private pausedSource = false;
  private dropped = false;
  private finishing: "end" | "reset" | undefined;

  constructor(
    private readonly shape: Shape,
    private readonly source: Socket,
    private readonly sink: Socket,
  ) {
    sink.on("drain", () => {
      this.blocked = false;
      this.flush();
    });
  }

  carry(bytes: Buffer): void {
    if (this.dropped || this.finishing !== undefined || bytes.length === 0) return;
    const now = performance.now();
    const rate = this.shape.bytesPerSecond;
    if (rate === undefined) {
      this.enqueue({ due: now + this.shape.delayMs, bytes });
    } else {
      // Slices of about 10 ms of transfer, so a capped stream trickles rather than lurches.
      const slice = Math.max(1024, Math.floor(rate / 100));
      for (let offset = 0; offset < bytes.length; offset += slice) {
        const part = bytes.subarray(offset, offset + slice);
        this.lineFreeAt = Math.max(now, this.lineFreeAt) + (part.length * 1000) / rate;
        this.enqueue({ due: this.lineFreeAt + this.shape.delayMs, bytes: part });
      }
    }
    if (this.queued > this.shape.backlogLimit && !this.pausedSource) {
      this.pausedSource = true;
      this.source.pause();
    }
    this.flush();
  }

  /** Runs `act` once everything carried so far has arrived, as if it travelled with the bytes. */
  after(act: () => void): void {
    if (this.dropped) return;
    const now = performance.now();
    this.enqueue({ due: Math.max(now, this.lineFreeAt) + this.shape.delayMs, act });
    this.flush();
  }

  /** The source ended cleanly: end the sink after the bytes in flight. */
  end(): void {
    if (this.finishing !== undefined) return;
    this.finishing = "end";
    this.after(() => this.sink.end());
  }

  /** The source went away: after the bytes in flight, reset the sink unless it ended cleanly. */
  abort(hadError: boolean): void {
    if (this.finishing === "reset" || (this.finishing === "end" && !hadError)) return;
    this.finishing = "reset";
    this.after(() => resetSocket(this.sink));
  }

  /** Forgets everything in flight and carries nothing more. */
  drop(): void {
    this.dropped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.queue = [];
    this.queued = 0;
    if (this.pausedSource) {
      this.pausedSource = false;
      this.source.resume();
    }
  }

  private enqueue(item: Carried): void {
    this.queue.push(item);
    if ("bytes" in item) this.queued += item.bytes.length;
  }

  private flush(): void {
    // A pending timer is for the head, which is not due yet.
    if (this.timer !== undefined) return;
    while (!this.blocked && !this.dropped) {
      const next = this.queue[0];
      if (next === undefined) break;
      const wait = next.due - performance.now();
      if (wait > 0) {
        this.timer = setTimeout(() => {
          this.timer = undefined;
          this.flush();
        }, Math.ceil(wait));
        break;
      }
      this.queue.shift();
      if ("act" in next) {
        next.act();
        continue;
      }
      this.queued -= next.bytes.length;
      if (!this.sink.destroyed && !this.sink.write(next.bytes)) this.blocked = true;
    }
    if (this.pausedSource && this.queued <= this.shape.backlogLimit / 2) {
      this.pausedSource = false;
      this.source.resume();
    }
  }
}
