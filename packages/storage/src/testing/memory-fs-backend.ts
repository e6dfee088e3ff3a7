import { frameBackend } from "../adapter/backend-frame.js";
import type { StorageBackend } from "../backend.js";
import { fsOperations } from "../fs-protocol/operations.js";
import { FsStore } from "../fs-protocol/store.js";
import { LOCAL_CAPABILITIES } from "../local/driver.js";
import { type FsImageEntry, MemoryFsDriver } from "./memory-fs-driver.js";

/**
 * A local destination's write protocol (`FsStore` with the local driver's capabilities and
 * transfers) over an in-memory disk that starts as `image`: what fault suites run a command on
 * when they cut its power, since a real disk cannot be made to forget what was not flushed.
 */
export function createMemoryDiskBackend(
  image: readonly FsImageEntry[],
  options: { fsync?: boolean } = {},
): { backend: StorageBackend; driver: MemoryFsDriver } {
  const driver = new MemoryFsDriver({ capabilities: LOCAL_CAPABILITIES, image });
  const backend = frameBackend(
    {
      name: driver.name,
      location: `${driver.name}:disk`,
      writeConcurrency: 16,
      mapError: (error, operation, path) => driver.toStorageError(error, operation, path),
    },
    fsOperations(new FsStore(driver, { fsync: options.fsync ?? true })),
  );
  return { backend, driver };
}
