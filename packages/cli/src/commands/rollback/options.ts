/** What `distributor rollback` hands its handler once its flags are checked. */
export interface RollbackCommandOptions {
  configPath: string;
  pipelineId: string;
  destinationId: string;
  /** `--bundle-path`; absent: the destination root. */
  bundlePath?: string;
  /** `--to <release>`; absent with `--previous`. */
  to?: string;
  dryRun: boolean;
  /** `--verify`: compare every file's digest with the target's snapshot. */
  verify: boolean;
  /** `--force`: switch to a target that changed since it was committed. */
  force: boolean;
  lockTimeout?: string;
}
