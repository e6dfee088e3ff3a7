import { newReleaseId, peekStateRelease } from "@distributor/state";
import { isStorageError, type StorageBackend } from "@distributor/storage";
import type { PublishTargetOptions } from "../execute/commit.js";
import { planTarget } from "../plan/plan-target.js";
import type { LeaseGuard } from "../protocol/lease-guard.js";
import { recordIdentities } from "./identities.js";
import { identitiesPath, liveRelease, snapshotPath } from "./layout.js";
import { stagedAmong, storedReleases } from "./releases.js";
import { releaseSource } from "./sources.js";
import { StagedStateView } from "./staged-state-view.js";
import type { StagingView } from "./staging-view.js";
import { ReleaseView } from "./view.js";

/**
 * The commit point of a staged release, under the lease once the run's state is committed to
 * its staging state: the identity record, then the snapshot — the staging state's bytes, written
 * no-clobber — then the staging state goes. Until the snapshot is there the release is not
 * staged (the next run removes it as one a killed run left); once it is, it is complete and
 * promotable. The live state and `current` are not touched.
 */
export async function commitStaged(
  view: StagingView,
  lease: LeaseGuard,
  signal?: AbortSignal,
): Promise<void> {
  const { inner, bundlePath } = view;
  const id = view.next as string;
  const { bytes } = await inner.readVersioned(view.stagingPath, { signal });
  const recorded = peekStateRelease(bytes);
  if (recorded !== id) {
    throw new Error(
      `${view.stagingPath} records release ${recorded ?? "(none)"}, not ${id}; nothing was staged`,
    );
  }
  // A release is staged only while it is newer than the one in force: one that went live while
  // this run waited for the lease (with a later id) would leave this release an earlier one, which
  // no promotion takes. It is left uncommitted (the next run removes it) and the run says so.
  const live = await liveRelease(inner, bundlePath, signal);
  if (live !== undefined && live >= id) {
    throw new Error(
      `release ${live} went live while release ${id} was being staged, so ${id} would not be newer than the live release; nothing was staged (staging the source again builds it on the live release)`,
    );
  }
  // Confirmed first: a run that lost its lease must not leave a record of a release that the
  // run that took over may be removing as abandoned.
  await lease.confirm();
  if (!(await exists(inner, identitiesPath(bundlePath, id), signal))) {
    await recordIdentities(inner, bundlePath, id, view.limits, signal, view.carried);
  }
  // Confirmed just before: a run that stalled past its lease must not commit a release whose
  // directory the run that took over may be removing as abandoned.
  await lease.confirm();
  await inner.writeFile(snapshotPath(bundlePath, id), bytes, {
    overwrite: false,
    commit: true,
    signal,
  });
  await inner.deletePaths("", [view.stagingPath], { ignoreMissing: true, signal });
}

/** The staged releases of a bundle path (committed, newer than the one in force), oldest first. */
export async function stagedReleases(
  destination: StorageBackend,
  bundlePath: string,
  signal?: AbortSignal,
): Promise<string[]> {
  const committed = (await storedReleases(destination, bundlePath, signal))
    .filter((release) => release.snapshot && release.directory)
    .map((release) => release.id);
  const live =
    (await liveRelease(destination, bundlePath, signal)) ??
    (await new ReleaseView(destination, bundlePath).stateRelease(signal));
  return stagedAmong(committed, live);
}

/** The newest staged release that published the source with `digest`; undefined when none did. */
export async function stagedOfSource(
  destination: StorageBackend,
  bundlePath: string,
  digest: string,
  signal?: AbortSignal,
): Promise<string | undefined> {
  const staged = await stagedReleases(destination, bundlePath, signal);
  for (const id of staged.reverse()) {
    if ((await releaseSource(destination, bundlePath, id, signal)) === digest) return id;
  }
  return undefined;
}

/**
 * Whether staged release `id` is what this run would publish, configuration included: planned
 * against the release's snapshot as the state (reading only), the run skips. A release staged
 * from the same source under another configuration (a Markdown mode, metadata) is not.
 */
export async function stagedAsConfigured(
  options: PublishTargetOptions,
  id: string,
): Promise<boolean> {
  const { destination, target, limits } = options.plan;
  const view = new StagedStateView(destination, target.bundlePath, id, limits);
  const now = options.now();
  const plan = await planTarget({
    ...options.plan,
    destination: view,
    // Under the release layout a plan names the release it would build: which one is moot here.
    target: { ...target, release: newReleaseId(now) },
    now,
  });
  return plan.action === "skip_same";
}

async function exists(backend: StorageBackend, path: string, signal?: AbortSignal) {
  try {
    await backend.stat(path, { signal });
    return true;
  } catch (error) {
    if (isStorageError(error, "not_found")) return false;
    throw error;
  }
}
