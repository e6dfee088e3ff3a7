import { S3Client, type S3ClientConfig } from "@aws-sdk/client-s3";

export interface S3Credentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

export interface ClientOptions {
  region: string;
  endpoint?: string | undefined;
  forcePathStyle: boolean;
  credentials?: S3Credentials | undefined;
  maxAttempts: number;
}

/**
 * One SDK client per backend. Checksums only where the API requires them: SDK releases since 2025
 * add CRC checksums to every upload by default, which several S3-compatible stores reject.
 * Retries use the SDK's adaptive mode (client-side rate limiting on throttling) with a bound.
 */
export function createClient(options: ClientOptions): S3Client {
  const config: S3ClientConfig = {
    region: options.region,
    forcePathStyle: options.forcePathStyle,
    requestChecksumCalculation: "WHEN_REQUIRED",
    responseChecksumValidation: "WHEN_REQUIRED",
    retryMode: "adaptive",
    maxAttempts: options.maxAttempts,
  };
  if (options.endpoint !== undefined) config.endpoint = options.endpoint;
  // Both or neither: without explicit credentials the SDK's default chain (environment, profile,
  // instance role, ...) applies.
  if (options.credentials !== undefined) config.credentials = options.credentials;
  return new S3Client(config);
}
