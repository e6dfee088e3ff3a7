import type { RollbackOptions, RollbackReport } from "./rollback.js";
import { switchRelease } from "./rollback.js";

export interface PromoteOptions extends Omit<RollbackOptions, "to"> {
  /** The staged release to make live. */
  to?: string | undefined;
  /** Make the newest staged release live (instead of `to`). */
  latest?: boolean | undefined;
}

/**
 * Makes a staged release (committed, newer than the one in force) live, with `rollback`'s checks:
 * under the lease the target is verified against what was committed (`release_drift` names the
 * files that changed since it was staged, unless `force`), the state becomes its snapshot by a
 * compare-and-swap, and `current` is switched and confirmed. Nothing is written or copied; a
 * rollback afterwards (`--previous`) returns to the release that was live before. A target that
 * is not staged is refused (`not_staged`, `no_staged_release`).
 */
export async function promote(options: PromoteOptions): Promise<RollbackReport> {
  if ((options.to === undefined) === !options.latest) {
    throw new TypeError("promote needs exactly one of `to` and `latest`");
  }
  return switchRelease(options, { promote: true, latest: options.latest === true });
}
