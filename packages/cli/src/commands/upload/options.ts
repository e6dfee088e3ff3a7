/** What `distributor upload` hands its handler once its flags are checked. */
export interface UploadCommandOptions {
  /** `--server`: base URL of `distributor serve`, checked to be http(s). */
  server: string;
  pipelineId: string;
  /** `--token-env`: the environment variable holding the upload token. */
  tokenEnv: string;
  /** `--idempotency-key` as typed; the handler checks it (generated when absent). */
  idempotencyKey?: string;
  wait: boolean;
  /** The bundle directory as typed. */
  path: string;
  /** `--sign`: sign the manifest with this key file first. */
  sign?: string;
  /** `--signature-namespace` (default `distributor`). */
  signatureNamespace?: string;
  /** `--max-files`: most files the bundle may list (default 10000, the pipelines' default). */
  maxFiles?: number;
}
