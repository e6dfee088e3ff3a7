export {
  createLocalBackend,
  type LocalBackendOptions,
  MAX_FILESYSTEM_PATH_BYTES,
} from "./backend.js";
