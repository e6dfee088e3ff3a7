import type { RollbackCommandOptions } from "../rollback/options.js";

/** `distributor promote`: rollback's options, aimed at a staged release. */
export interface PromoteCommandOptions extends Omit<RollbackCommandOptions, "to"> {
  /** `--to <release>`; absent with `--latest`. */
  to?: string;
  /** `--latest`: the newest staged release. */
  latest: boolean;
}
