import { posix } from "node:path";

/** Default bound of a render cache: rendered HTML kept for reuse, in bytes. */
export const DEFAULT_RENDER_CACHE_BYTES = 32 * 1024 * 1024;

/**
 * Rendered HTML shared by the destinations (and bundles) of one run, keyed by what the HTML is
 * made of: the transform, the Markdown's digest and the file name (the title falls back to its
 * stem). Two bundles with a Markdown file at the same path but other bytes never share an entry.
 * Bounded: the least recently used renderings are dropped past `maxBytes`.
 */
export class RenderCache {
  readonly #entries = new Map<string, Promise<Uint8Array>>();
  readonly #sizes = new Map<string, number>();
  readonly #maxBytes: number;
  #bytes = 0;

  constructor(maxBytes = DEFAULT_RENDER_CACHE_BYTES) {
    this.#maxBytes = maxBytes;
  }

  static key(transform: string, sha256: string, sourcePath: string): string {
    return `${transform}\u0000${sha256}\u0000${posix.basename(sourcePath)}`;
  }

  /** The rendering for `key`, started with `render` when it is not cached. */
  get(key: string, render: () => Promise<Uint8Array>): Promise<Uint8Array> {
    const cached = this.#entries.get(key);
    if (cached !== undefined) {
      // Re-inserted: Map order is the recency order.
      this.#entries.delete(key);
      this.#entries.set(key, cached);
      return cached;
    }
    const rendering = render();
    this.#entries.set(key, rendering);
    rendering.then(
      (bytes) => this.#account(key, rendering, bytes.length),
      () => this.#drop(key, rendering),
    );
    return rendering;
  }

  get size(): number {
    return this.#entries.size;
  }

  #account(key: string, rendering: Promise<Uint8Array>, size: number): void {
    if (this.#entries.get(key) !== rendering) return;
    this.#sizes.set(key, size);
    this.#bytes += size;
    for (const [oldest, promise] of this.#entries) {
      if (this.#bytes <= this.#maxBytes) break;
      this.#drop(oldest, promise);
    }
  }

  #drop(key: string, rendering: Promise<Uint8Array>): void {
    if (this.#entries.get(key) !== rendering) return;
    this.#entries.delete(key);
    this.#bytes -= this.#sizes.get(key) ?? 0;
    this.#sizes.delete(key);
  }
}
