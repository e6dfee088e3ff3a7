export type {
  DeleteOptions,
  EntryKind,
  OperationOptions,
  ReadOptions,
  StorageBackend,
  StorageEntry,
  WalkOptions,
  WriteData,
  WriteOptions,
} from "./backend.js";
export {
  isStorageError,
  StorageError,
  type StorageErrorKind,
  type StorageErrorOptions,
  type StorageOperation,
} from "./errors.js";
export { createLocalBackend, type LocalBackendOptions } from "./local/index.js";
export { createMemoryBackend, type MemoryBackendOptions } from "./memory/index.js";
export {
  compareLogicalPaths,
  displayPath,
  isValidPath,
  isValidPrefix,
  isWithinPrefix,
  join,
  joinPrefix,
  managedBundleTargets,
  managedOutputTargets,
  parentPath,
  pathProblem,
  relativeTo,
  STATE_FILE_NAME,
  statePath,
  validatePath,
  validatePrefix,
} from "./paths.js";
