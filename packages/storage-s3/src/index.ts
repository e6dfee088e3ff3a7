export { createS3Backend, type S3BackendOptions } from "./backend.js";
export {
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_REQUEST_TIMEOUT_MS,
  type S3Credentials,
} from "./client.js";
export { type OpenS3LocationOptions, openS3Location, type S3LocationConfig } from "./location.js";
