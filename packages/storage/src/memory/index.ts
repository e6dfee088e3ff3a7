export { createMemoryBackend, type MemoryBackendOptions } from "./backend.js";
