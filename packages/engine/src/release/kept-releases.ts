import type { StorageBackend } from "@distributor/storage";
import { DEFAULT_DESTINATION_LIMITS, type DestinationLimits } from "../protocol/limits.js";
import { checkRelease, type ReleaseCheck } from "./identities.js";
import { storedReleases } from "./releases.js";

/**
 * Every committed release of a bundle path (one with a snapshot), oldest first, compared with
 * what was committed (see `checkRelease`): what `audit` reports, so that a release that changed
 * is found before a rollback needs it. `only` narrows the check to those ids.
 */
export async function checkKeptReleases(
  backend: StorageBackend,
  bundlePath: string,
  options: {
    limits?: DestinationLimits | undefined;
    only?: readonly string[] | undefined;
    signal?: AbortSignal | undefined;
  } = {},
): Promise<ReleaseCheck[]> {
  const limits = options.limits ?? DEFAULT_DESTINATION_LIMITS;
  const committed = (await storedReleases(backend, bundlePath, options.signal)).filter(
    (release) => release.snapshot && (options.only?.includes(release.id) ?? true),
  );
  const checks: ReleaseCheck[] = [];
  for (const release of committed) {
    checks.push(
      await checkRelease(backend, bundlePath, release.id, { limits, signal: options.signal }),
    );
  }
  return checks;
}
