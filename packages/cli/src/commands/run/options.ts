/** What `distributor run` hands its handler once its flags are checked. */
export interface RunCommandOptions {
  /** `--config`, defaulting to `./distributor.yml`. */
  configPath: string;
  /** `--pipeline` values in command-line order; empty means every pipeline. */
  pipelineIds: string[];
  dryRun: boolean;
  force: boolean;
  /** `--repair`: restore missing or changed managed outputs of unchanged sources. */
  repair: boolean;
  /** `--stage`: commit each release without making it live (layout: releases). */
  stage: boolean;
  /** `--allow-deletes N`: deletes allowed whatever a destination's `max_deletes` says. */
  allowDeletes?: number;
  /** `--lock-timeout` as typed (a Go duration); the handler parses it. */
  lockTimeout?: string;
  /** `--plan-out`: plan only, and save the plan to this file. */
  planOut?: string;
  /** `--quiet`: no progress display and no summary line, even on a terminal. */
  quiet: boolean;
}
