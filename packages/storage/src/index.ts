export type {
  ByteReader,
  ChunkConsumer,
  DeleteOptions,
  EntryKind,
  LinkOperations,
  OperationOptions,
  ReadOptions,
  StorageBackend,
  StorageEntry,
  VersionedFile,
  VersionedReader,
  WalkOptions,
  WriteData,
  WriteOptions,
  WriteResult,
} from "./backend.js";
export { fanOutSignal, mapBounded } from "./concurrency.js";
export { ConfigError, type ConfigErrorOptions, isConfigError } from "./config-error.js";
export {
  isStorageError,
  StorageError,
  type StorageErrorKind,
  type StorageErrorOptions,
  type StorageOperation,
} from "./errors.js";
export {
  createLocalBackend,
  type LocalBackendOptions,
  MAX_FILESYSTEM_PATH_BYTES,
} from "./local/index.js";
export { createMemoryBackend, type MemoryBackendOptions } from "./memory/index.js";
export {
  escapeName,
  isReservedName,
  isTempFileFor,
  isTempFileName,
  LEASE_FILE_NAME,
  nameProblem,
  reservedSegment,
  STATE_FILE_NAME,
  statePath,
} from "./names.js";
export {
  compareLogicalPaths,
  DEFAULT_LISTING_LIMIT,
  displayPath,
  isValidPath,
  isValidPrefix,
  isWithinPrefix,
  join,
  joinEach,
  joinPrefix,
  locatePath,
  parentPath,
  pathProblem,
  relativeTo,
  validatePath,
  validatePrefix,
} from "./paths.js";
export { consumeChunks, readFileChunks } from "./read-chunks.js";
export {
  isSecretName,
  type ResolveSecretOptions,
  resolveSecret,
  SECRET_NAME_PATTERN,
  SecretError,
} from "./secrets.js";
export { runInSlices, runSteps, SliceClock, type Steps, sortSteps } from "./steps.js";
