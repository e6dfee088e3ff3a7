/** What `distributor prune` hands its handler once its flags are checked. */
export interface PruneCommandOptions {
  configPath: string;
  pipelineId: string;
  destinationId: string;
  /** True for `--dry-run`, false for `--apply` (exactly one is given). */
  dryRun: boolean;
  lockTimeout?: string;
}
