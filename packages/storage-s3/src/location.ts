import { resolveSecret, type StorageBackend } from "@distributor/storage";
import { createS3Backend } from "./backend.js";

/**
 * An `s3` location as `@distributor/publish` parses it from configuration (its `S3Location`),
 * declared here by shape so this package does not depend on the publish package. Absent fields
 * take the backend's defaults.
 */
export interface S3LocationConfig {
  backend?: "s3";
  bucket: string;
  /** Logical prefix inside the bucket; `""` (default) is the bucket root. */
  prefix?: string;
  /** Default `us-east-1`. */
  region?: string;
  /** Absolute http(s) URL of an S3-compatible service; absent for AWS. */
  endpoint?: string;
  forcePathStyle?: boolean;
  /**
   * Secret references (environment variable, else a file in `secrets.directory`) naming the
   * access key id and secret access key. Absent: the SDK's default credential chain.
   */
  credentials?: { accessKeyIdEnv: string; secretAccessKeyEnv: string };
  timeouts?: { connectMs?: number; requestMs?: number };
  /** Multipart uploads: bytes per part (objects up to one part are one PUT), parts at once. */
  multipart?: { partSize?: number; concurrency?: number };
}

/** What opening a configured location needs besides the location (publish's `OpenBackendOptions` fits). */
export interface OpenS3LocationOptions {
  /** `secrets.directory` of the configuration: where references resolve when not in the environment. */
  secrets?: { directory?: string };
  /** Where secret references are looked up first; default `process.env`. */
  env?: NodeJS.ProcessEnv;
  signal?: AbortSignal;
}

/**
 * Opens the backend of a configured `s3` location. Credentials come from the two secret
 * references it names (both or neither, as configuration validation enforces); neither leaves
 * the SDK's default chain (instance roles, profiles) in charge.
 */
export async function openS3Location(
  location: S3LocationConfig,
  options: OpenS3LocationOptions = {},
): Promise<StorageBackend> {
  let credentials: { accessKeyId: string; secretAccessKey: string } | undefined;
  if (location.credentials !== undefined) {
    const lookup = {
      secretsDirectory: options.secrets?.directory,
      ...(options.env === undefined ? {} : { env: options.env }),
      ...(options.signal === undefined ? {} : { signal: options.signal }),
    };
    credentials = {
      accessKeyId: await resolveSecret(location.credentials.accessKeyIdEnv, lookup),
      secretAccessKey: await resolveSecret(location.credentials.secretAccessKeyEnv, lookup),
    };
  }
  return createS3Backend({
    bucket: location.bucket,
    ...(location.prefix === undefined ? {} : { prefix: location.prefix }),
    ...(location.region === undefined ? {} : { region: location.region }),
    ...(location.forcePathStyle === undefined ? {} : { forcePathStyle: location.forcePathStyle }),
    ...(location.endpoint === undefined ? {} : { endpoint: location.endpoint }),
    ...(credentials === undefined ? {} : { credentials }),
    ...(location.timeouts?.connectMs === undefined
      ? {}
      : { connectTimeoutMs: location.timeouts.connectMs }),
    ...(location.timeouts?.requestMs === undefined
      ? {}
      : { requestTimeoutMs: location.timeouts.requestMs }),
    ...(location.multipart?.partSize === undefined
      ? {}
      : { partSize: location.multipart.partSize, multipartThreshold: location.multipart.partSize }),
    ...(location.multipart?.concurrency === undefined
      ? {}
      : { partConcurrency: location.multipart.concurrency }),
  });
}
