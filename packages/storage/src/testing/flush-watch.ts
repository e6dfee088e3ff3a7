import type { StorageBackend } from "../backend.js";
import { type LocalBackendOptions, localBackendOver } from "../local/backend.js";
import type { LocalCalls } from "../local/calls.js";
import { LocalDriver } from "../local/driver.js";

/** A flush of a local backend that has just completed: of a file's data, or of a directory's names. */
export type LocalFlush = { kind: "file" } | { kind: "directory"; path: string };

/**
 * A local backend, as `createLocalBackend` makes it, that calls `afterFlush` synchronously right
 * after each of its flushes completed (an `fsync` of a file or of a directory) and before the
 * code that asked for it goes on. Its flushes run one at a time, so no flush is in flight while
 * `afterFlush` runs: a harness that copies the block device under the directory there copies
 * what the device held at that flush boundary (docs/design/power-loss.md, "The real kernel").
 */
export function createFlushWatchedLocalBackend(
  options: LocalBackendOptions,
  afterFlush: (flush: LocalFlush) => void,
): StorageBackend {
  return localBackendOver(
    options,
    (root, calls) => new FlushWatchedDriver(root, calls, afterFlush),
  );
}

class FlushWatchedDriver extends LocalDriver {
  #queue: Promise<unknown> = Promise.resolve();

  constructor(
    root: string,
    calls: LocalCalls,
    readonly afterFlush: (flush: LocalFlush) => void,
  ) {
    super(root, calls);
  }

  override fsync(fd: number): Promise<void> {
    return this.#oneAtATime(() => super.fsync(fd), { kind: "file" });
  }

  override syncDirectory(path: string): Promise<void> {
    return this.#oneAtATime(() => super.syncDirectory(path), { kind: "directory", path });
  }

  #oneAtATime(flush: () => Promise<void>, what: LocalFlush): Promise<void> {
    const done = this.#queue.then(async () => {
      await flush();
      this.afterFlush(what);
    });
    this.#queue = done.catch(() => undefined);
    return done;
  }
}
