import type { ReleaseCheck } from "./identities.js";

/**
 * A rollback (or promotion) refused before anything changed: `code` says why —
 * `release_not_found`, `no_previous_release`, `invalid_release_id`, `state_invalid`,
 * `release_drift` (the target changed since it was committed), `not_owner`, `not_staged` and
 * `no_staged_release` (a promotion's target is not a staged release),
 * `publication_interrupted` (the state carries a run's replacement marker), `state_valid`,
 * `state_missing` and `live_release_unknown` (a rebuild with nothing to rebuild, or that cannot
 * tell which release was live).
 */
export class ReleaseRefusedError extends Error {
  override readonly name = "ReleaseRefusedError";
  constructor(
    readonly code: string,
    message: string,
    /** For `release_drift`: what the check of the target found. */
    readonly check?: ReleaseCheck,
  ) {
    super(message);
  }
}
