/** What `distributor reconcile state` hands its handler once its flags are checked. */
export interface ReconcileStateCommandOptions {
  configPath: string;
  pipelineId: string;
  destinationId: string;
  allOwners: boolean;
  /** `--adopt` or `--rebuild` (at most one); absent for the plain repair of missing records. */
  mode?: "adopt" | "rebuild";
  dryRun: boolean;
  lockTimeout?: string;
  /** `--bundle-path`; absent: the destination root. */
  bundlePath?: string;
}
