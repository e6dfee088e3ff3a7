import { MAX_FILESYSTEM_PATH_BYTES, type StorageBackend } from "@distributor/storage";
import { FsStore, frameBackend, fsOperations } from "@distributor/storage/adapter";
import { openSession } from "./connect.js";
import { SftpDriver } from "./driver.js";
import { BACKEND_NAME } from "./errors.js";
import { describeLocation, normaliseRoot, type SshBackendOptions } from "./options.js";

/**
 * Connects to the server and returns a backend over the directory `root` there: the write
 * protocol of `@distributor/storage/adapter` over an `SftpDriver`. The one SSH connection is
 * reused by every operation until `close`. See the package README for semantics.
 */
export async function createSshBackend(options: SshBackendOptions): Promise<StorageBackend> {
  const session = await openSession(options);
  const root = normaliseRoot(options.root);
  const location = describeLocation(options);
  const driver = new SftpDriver(session, root);
  return frameBackend(
    {
      name: BACKEND_NAME,
      location,
      // Size and whole-second mtime: two writes of one path can share a version.
      versionsMayRepeat: true,
      // Enough files in flight to keep every channel busy while others wait on an fsync.
      writeConcurrency: 16,
      // The server's PATH_MAX below the root (a relative root's home directory is not known:
      // the limit is then an upper bound, and the server refuses what still does not fit).
      maxPathBytes: MAX_FILESYSTEM_PATH_BYTES - Buffer.byteLength(root) - 1,
      mapError: (error, operation, path) => driver.toStorageError(error, operation, path),
    },
    fsOperations(new FsStore(driver, { fsync: options.fsync ?? true })),
  );
}
