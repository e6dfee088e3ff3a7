export { createS3Backend, type S3BackendOptions } from "./backend.js";
export type { S3Credentials } from "./client.js";
