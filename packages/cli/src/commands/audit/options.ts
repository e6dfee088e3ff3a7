/** What `distributor audit` hands its handler once its flags are checked. */
export interface AuditCommandOptions {
  configPath: string;
  /** `--pipeline` values; empty means every pipeline. */
  pipelineIds: string[];
  destinationId?: string;
  /** `--quiet`: no progress on stderr, even on a terminal. */
  quiet: boolean;
  /** `--release`: under layout: releases, check every committed release or the current one. */
  releases: "all" | "current";
}
