import { ConfigError, pathProblem, resolveSecret, type StorageBackend } from "@distributor/storage";
import { isRecord, OptionChecks, shown } from "@distributor/storage/adapter";
import { bucketProblem, createS3Backend, MIN_PART_SIZE } from "./backend.js";

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
 * references it names (both or neither); neither leaves the SDK's default chain (instance roles,
 * profiles) in charge. The location is checked first: a missing or malformed key fails with one
 * `ConfigError` naming every such key, before any secret is read or request made.
 */
export async function openS3Location(
  location: S3LocationConfig,
  options: OpenS3LocationOptions = {},
): Promise<StorageBackend> {
  checkS3Location(location);
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

/** The largest part S3 accepts. */
const MAX_PART_SIZE = 5 * 1024 ** 3;

/** Throws one `ConfigError` naming every missing or malformed key of `location`. */
function checkS3Location(location: unknown): asserts location is S3LocationConfig {
  if (!isRecord(location)) {
    throw new ConfigError("s3 location", [
      `the location must be an object, not ${shown(location)}`,
    ]);
  }
  const checks = new OptionChecks(location);
  checks.oneOf("backend", ["s3"]);
  const bucket = checks.text("bucket", true);
  const bucketIssue = bucket === undefined ? undefined : bucketProblem(bucket);
  if (bucketIssue !== undefined) checks.problem("bucket", bucketIssue);
  const prefix = checks.string("prefix", false);
  if (prefix !== undefined && prefix !== "") {
    const problem = pathProblem(prefix);
    if (problem !== undefined) {
      checks.problem(
        "prefix",
        `${JSON.stringify(prefix)} is not a relative path below the bucket: ${problem}`,
      );
    }
  }
  checks.text("region", false);
  const endpoint = checks.text("endpoint", false);
  if (endpoint !== undefined && !/^https?:\/\/[^/]/.test(endpoint)) {
    checks.problem(
      "endpoint",
      `must be an absolute http:// or https:// URL, not ${shown(endpoint)}`,
    );
  }
  checks.boolean("forcePathStyle");
  const credentials = checks.nested("credentials");
  credentials?.secretName("accessKeyIdEnv", true);
  credentials?.secretName("secretAccessKeyEnv", true);
  const timeouts = checks.nested("timeouts");
  timeouts?.integer("connectMs", 1);
  timeouts?.integer("requestMs", 1);
  const multipart = checks.nested("multipart");
  multipart?.integer("partSize", MIN_PART_SIZE, MAX_PART_SIZE);
  multipart?.integer("concurrency", 1);
  if (checks.issues.length > 0) {
    const named = bucket !== undefined && bucketIssue === undefined;
    const where = named ? `s3 location s3://${bucket}${prefix ? `/${prefix}` : ""}` : "s3 location";
    throw new ConfigError(where, checks.issues);
  }
}
