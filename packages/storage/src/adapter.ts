/**
 * What an adapter package (S3, SFTP, ...) builds a backend from. `frameBackend` supplies the parts
 * of the contract that do not depend on where bytes live: path validation before any IO, the
 * closed state, cancellation with the signal's own reason, ownership of a write's source stream
 * and error wrapping. An adapter writes only its `BackendOperations`; an adapter over a
 * filesystem-like store writes only an `FsDriver` and takes its operations from `fsOperations`.
 */

export { abortable, throwIfAborted } from "./adapter/abort.js";
export {
  type BackendErrorFactory,
  backendErrors,
  errorMessage,
  hasNativeCode,
  nativeCode,
  nativeErrorMapper,
  sourceStreamFailed,
  versionMismatch,
} from "./adapter/backend-error.js";
export {
  type BackendIdentity,
  type BackendOperations,
  frameBackend,
  type WriteOperation,
} from "./adapter/backend-frame.js";
export {
  CHUNK_BYTES,
  releaseChunkBuffer,
  takeChunkBuffer,
} from "./adapter/chunk-buffers.js";
export { checkCount } from "./adapter/limits.js";
export { isRecord, OptionChecks, shown } from "./adapter/option-checks.js";
export { isByteReader, type WriteSource, writeSource } from "./adapter/write-source.js";
export { inferContentType } from "./content-type.js";
export {
  type FsCapabilities,
  type FsDirEntry,
  type FsDriver,
  type FsFailure,
  type FsKind,
  type FsPath,
  type FsReadOverrides,
  type FsStats,
  FsStore,
  type FsStoreOptions,
  fsOperations,
  type PathState,
  withSwapLock,
} from "./fs-protocol/index.js";
export {
  escapeName,
  nameProblem,
  swapBreakerName,
  swapLockName,
  tempFileName,
} from "./names.js";
