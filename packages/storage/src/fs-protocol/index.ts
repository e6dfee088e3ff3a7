/**
 * The write protocol of filesystem-like stores (local directories, SFTP), written once above an
 * `FsDriver` that only does IO: temp names, no-clobber creates, compare-and-swap under a swap
 * lock, fenced deletes, step-by-step directory creation that refuses symlinks, clean-up of the
 * directories a failed write made, flush batching and version tokens. See the package README for
 * how to write a driver.
 */

export type {
  FsCapabilities,
  FsDirEntry,
  FsDriver,
  FsFailure,
  FsKind,
  FsPath,
  FsStats,
} from "./driver.js";
export { type FsReadOverrides, fsOperations } from "./operations.js";
export { FsStore, type FsStoreOptions, type PathState } from "./store.js";
export { withSwapLock } from "./swap-lock.js";
