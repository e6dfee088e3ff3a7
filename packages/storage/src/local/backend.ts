import { resolve } from "node:path";
import { frameBackend } from "../adapter/backend-frame.js";
import type { StorageBackend } from "../backend.js";
import { fsOperations } from "../fs-protocol/operations.js";
import { FsStore } from "../fs-protocol/store.js";
import { blockingCalls, type LocalCalls, threadPoolCalls } from "./calls.js";
import type { LocalRoot } from "./context.js";
import { LocalDriver } from "./driver.js";
import { BACKEND_NAME } from "./errno.js";
import { openByteReader, openReadStream, openVersionedReader, readWholeFile } from "./read.js";

export interface LocalBackendOptions {
  /** Directory every logical path is confined to; relative paths resolve against the cwd. */
  root: string;
  /**
   * Flush every written file to disk before moving it into place (default true). With false,
   * only writes marked `commit` (the state, the lease) and their directories are flushed: a
   * power cut may then lose outputs the state already records, as with `cp` or `rclone`.
   */
  fsync?: boolean;
  /**
   * Make the small system calls (open, create, link, rename, unlink, rmdir, lstat, directory
   * reads, reads and writes) synchronously on the calling thread (default true): fastest for one
   * publication at a time, as the CLI runs them, but each call holds the event loop for as long
   * as the kernel takes, which on a busy disk can be milliseconds. With false they run on the
   * libuv thread pool, so a process serving many requests at once (`distributor serve`) keeps
   * answering while they wait. Flushes are on the thread pool either way.
   */
  blockingCalls?: boolean;
}

/**
 * Writes kept in flight by a publishing engine: the libuv thread pool (raised by the CLI) runs
 * their fsyncs side by side, which on most disks costs little more than one.
 */
const LOCAL_WRITE_CONCURRENCY = 16;

/** The longest path a Linux system call takes (PATH_MAX, 4 096, less the terminating NUL). */
export const MAX_FILESYSTEM_PATH_BYTES = 4_095;

/**
 * A backend over a directory of the local filesystem: the write protocol of `fs-protocol` over
 * a `LocalDriver`, with reads of its own into the caller's buffers. See the package README.
 */
export function createLocalBackend(options: LocalBackendOptions): StorageBackend {
  return localBackendOver(options, (root, calls) => new LocalDriver(root, calls));
}

/**
 * `createLocalBackend` over the driver `driverFor` makes: a test harness's subclass that watches
 * the driver's flushes (`@distributor/storage/testing`). Not a public entry point.
 */
export function localBackendOver(
  options: LocalBackendOptions,
  driverFor: (root: string, calls: LocalCalls) => LocalDriver,
): StorageBackend {
  const root = resolve(options.root);
  const calls = (options.blockingCalls ?? true) ? blockingCalls : threadPoolCalls;
  const driver = driverFor(root, calls);
  const local: LocalRoot = {
    root,
    calls,
    store: new FsStore(driver, { fsync: options.fsync ?? true }),
  };
  return frameBackend(
    {
      name: BACKEND_NAME,
      location: `${BACKEND_NAME}:${root}`,
      writeConcurrency: LOCAL_WRITE_CONCURRENCY,
      // Linux's PATH_MAX (4 096 bytes with the NUL) below the root and its slash.
      maxPathBytes: MAX_FILESYSTEM_PATH_BYTES - Buffer.byteLength(root) - 1,
      mapError: (error, operation, path) => driver.toStorageError(error, operation, path),
    },
    fsOperations(local.store, {
      readVersioned: (path, options) =>
        readWholeFile(local, path, options.maxBytes, options.signal),
      openRead: (path, options) => openReadStream(local, path, options.signal),
      openReader: (path, options) => openByteReader(local, path, options.signal),
      openVersionedReader: (path, options) =>
        openVersionedReader(local, path, options.maxBytes, options.signal),
    }),
  );
}
