export { createLocalBackend, type LocalBackendOptions } from "./backend.js";
