import { frameBackend } from "../adapter/backend-frame.js";
import type { StorageBackend } from "../backend.js";
import { fsOperations } from "../fs-protocol/operations.js";
import { FsStore } from "../fs-protocol/store.js";
import { LOCAL_CAPABILITIES } from "../local/driver.js";
import { type FsImageEntry, MemoryFsDriver } from "./memory-fs-driver.js";

/**
 * An in-memory disk holding `image`, with the local driver's capabilities: what fault suites
 * run a local destination on when they cut its power, since a real disk cannot be made to forget
 * what was not flushed.
 */
export function memoryDisk(image: readonly FsImageEntry[]): MemoryFsDriver {
  return new MemoryFsDriver({ capabilities: LOCAL_CAPABILITIES, image });
}

/**
 * A local destination's backend over `driver`: the write protocol (`FsStore`) and transfers of
 * `createLocalBackend`. Like it, each call opens a store of its own, which knows nothing of
 * what other backends over the same disk left unflushed.
 */
export function createMemoryDiskBackend(
  driver: MemoryFsDriver,
  options: { fsync?: boolean } = {},
): StorageBackend {
  return frameBackend(
    {
      name: driver.name,
      location: `${driver.name}:disk`,
      writeConcurrency: 16,
      mapError: (error, operation, path) => driver.toStorageError(error, operation, path),
    },
    fsOperations(new FsStore(driver, { fsync: options.fsync ?? true })),
  );
}
