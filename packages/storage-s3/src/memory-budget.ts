/**
 * Bytes that uploads running at once may hold in buffers, taken before an upload reads and
 * given back when it ends. An upload that needs more than is free waits for others to finish;
 * one alone always proceeds, so a part size above the budget still works, one at a time. With
 * many outputs in flight (`transfers`) this, not their number, bounds the memory.
 */
export class MemoryBudget {
  #used = 0;
  readonly #waiting: (() => void)[] = [];

  constructor(readonly limit: number) {}

  async take(bytes: number, signal: AbortSignal | undefined): Promise<void> {
    while (this.#used > 0 && this.#used + bytes > this.limit) {
      signal?.throwIfAborted();
      await new Promise<void>((resolve) => {
        const wake = () => {
          signal?.removeEventListener("abort", wake);
          resolve();
        };
        this.#waiting.push(wake);
        signal?.addEventListener("abort", wake, { once: true });
      });
    }
    signal?.throwIfAborted();
    this.#used += bytes;
  }

  give(bytes: number): void {
    this.#used -= bytes;
    for (const wake of this.#waiting.splice(0)) wake();
  }
}
