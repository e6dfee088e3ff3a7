/** What `distributor apply` hands its handler once its flags are checked. */
export interface ApplyCommandOptions {
  /** The plan file as typed. */
  planPath: string;
  /** `--config`; absent: the configuration the plan names. */
  configPath?: string;
  dryRun: boolean;
  lockTimeout?: string;
  /** `--max-age` as typed (a duration). */
  maxAge?: string;
  quiet: boolean;
}
