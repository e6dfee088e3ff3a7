import type { Manifest } from "@distributor/bundle";
import {
  isSharedRootState,
  type OwnerScope,
  parseDocument,
  peekReplacementMarker,
  peekSingleOwner,
  peekStateRelease,
  type StateDocument,
} from "@distributor/state";
import { isStorageError, locatePath, type StorageBackend, statePath } from "@distributor/storage";
import { compareAndSwapState } from "../protocol/commit-state.js";
import { holdLease } from "../protocol/hold-lease.js";
import type { LeaseOptions } from "../protocol/lease-file.js";
import type { DestinationLimits } from "../protocol/limits.js";
import { linksOf, snapshotPath } from "./layout.js";
import { finishRelease, type StoredRelease, storedReleases } from "./releases.js";
import { ReleaseView } from "./view.js";

/** One committed release, as `inspect` and `rollback` show it. */
export interface ReleaseSummary {
  id: string;
  /** `current` links to it. */
  current: boolean;
  /** The state records it. */
  recorded: boolean;
  /** The source it published (from its snapshot). */
  source: { id: string; created: Date; digest: string };
  publishedAt: Date;
  outputs: number;
}

/** The committed releases of a bundle path, oldest first, from their snapshots. */
export async function listReleases(
  destination: StorageBackend,
  bundlePath: string,
  signal?: AbortSignal,
): Promise<ReleaseSummary[]> {
  const view = new ReleaseView(destination, bundlePath);
  const [stored, live, recorded] = await Promise.all([
    storedReleases(destination, bundlePath, signal),
    view.live(signal),
    view.stateRelease(signal),
  ]);
  const summaries: ReleaseSummary[] = [];
  for (const release of stored.filter(committed)) {
    const document = await readSnapshot(destination, bundlePath, release.id, signal);
    summaries.push(summarize(release.id, document, live, recorded));
  }
  return summaries;
}

function committed(release: StoredRelease): boolean {
  return release.snapshot && release.directory;
}

function committedIds(stored: readonly StoredRelease[]): string[] {
  return stored.filter(committed).map((release) => release.id);
}

function summarize(
  id: string,
  document: StateDocument,
  live: string | undefined,
  recorded: string | undefined,
): ReleaseSummary {
  if (isSharedRootState(document)) throw new Error(`release ${id}: a shared-root snapshot`);
  const manifest: Manifest = document.source.manifest;
  return {
    id,
    current: id === live,
    recorded: id === recorded,
    source: { id: manifest.id, created: manifest.created, digest: manifest.digest },
    publishedAt: document.publishedAt,
    outputs: document.outputs.length,
  };
}

async function readSnapshot(
  destination: StorageBackend,
  bundlePath: string,
  id: string,
  signal?: AbortSignal,
): Promise<StateDocument> {
  const path = snapshotPath(bundlePath, id);
  const { bytes } = await destination.readVersioned(path, { signal });
  try {
    return parseDocument(Buffer.from(bytes).toString("utf8"));
  } catch (error) {
    throw new Error(`${locatePath(destination.location, path)}: ${(error as Error).message}`, {
      cause: error,
    });
  }
}

export interface RollbackOptions {
  destination: StorageBackend;
  bundlePath: string;
  owner: OwnerScope;
  /** The release to return to; without it, the newest committed release before `current`. */
  to?: string | undefined;
  dryRun: boolean;
  lease: LeaseOptions;
  signal?: AbortSignal | undefined;
  /** The destination's bounds, for the recovery taking the lease may run; default `DEFAULT_DESTINATION_LIMITS`. */
  limits?: DestinationLimits | undefined;
}

export interface RollbackResult {
  /** The release `current` linked to before. */
  from: string | undefined;
  to: string;
  /** False when `current` already linked to it (and for a dry run). */
  switched: boolean;
  /** Milliseconds from holding the lease to `current` switched: the state and the link. */
  switchMs: number;
}

/**
 * Makes a committed release the one in force again: under the lease, the state becomes that
 * release's snapshot (a compare-and-swap), then `current` is switched to it. No output is
 * written or copied. The next run of the source that release published skips.
 */
export async function rollbackRelease(options: RollbackOptions): Promise<RollbackResult> {
  const { destination, bundlePath, signal } = options;
  linksOf(destination, bundlePath);
  const look = new ReleaseView(destination, bundlePath);
  const [stored, live] = await Promise.all([
    storedReleases(destination, bundlePath, signal),
    look.live(signal),
  ]);
  const planned = chooseTarget(options, committedIds(stored), live);
  if (options.dryRun) return { from: live, to: planned, switched: false, switchMs: 0 };
  const lease = await holdLease(look, bundlePath, options.owner, {
    ...options.lease,
    signal,
    limits: options.limits,
  });
  const started = performance.now();
  try {
    // Chosen again under the lease: a publication or a retention may have come in between.
    const view = new ReleaseView(destination, bundlePath);
    const from = await view.live(signal);
    const to = chooseTarget(
      options,
      committedIds(await storedReleases(destination, bundlePath, signal)),
      from,
    );
    const path = statePath(bundlePath);
    let current: { bytes: Uint8Array; version: string } | undefined;
    try {
      current = await destination.readVersioned(path, { signal });
    } catch (error) {
      if (!isStorageError(error, "not_found")) throw error;
    }
    const holder = current === undefined ? undefined : peekSingleOwner(current.bytes);
    if (
      current !== undefined &&
      (holder?.pipelineId !== options.owner.pipelineId ||
        holder?.destinationId !== options.owner.destinationId)
    ) {
      throw new Error(
        `${locatePath(destination.location, path)} is not this pipeline and destination's state; nothing was changed`,
      );
    }
    if (current !== undefined && peekReplacementMarker(current.bytes)) {
      throw new Error(
        `${locatePath(destination.location, path)} says a publication is under way; run the pipeline again to finish it, then roll back`,
      );
    }
    // The snapshot is the state as committed for that release (never changed since): what is
    // checked is that it is this owner's and that release's, without parsing 10⁵ records.
    const where = locatePath(destination.location, snapshotPath(bundlePath, to));
    const snapshot = await destination.readVersioned(snapshotPath(bundlePath, to), { signal });
    const owner = peekSingleOwner(snapshot.bytes);
    if (
      owner === undefined ||
      owner.pipelineId !== options.owner.pipelineId ||
      owner.destinationId !== options.owner.destinationId
    ) {
      throw new Error(
        `${where} was not published by this pipeline and destination; nothing was changed`,
      );
    }
    const recorded = peekStateRelease(snapshot.bytes);
    if (recorded !== to) {
      throw new Error(
        `${where} records release ${recorded ?? "(none)"}, not ${to}; nothing was changed`,
      );
    }
    if (from === to && (await view.stateRelease(signal)) === to) {
      return { from, to, switched: false, switchMs: 0 };
    }
    lease.assertHeld();
    await lease.confirm();
    await compareAndSwapState(destination, path, snapshot.bytes, current?.version, signal);
    await finishRelease(view, to, lease, signal, snapshot.bytes);
    return { from, to, switched: true, switchMs: Math.round(performance.now() - started) };
  } finally {
    await lease.release();
  }
}

function chooseTarget(
  options: RollbackOptions,
  available: readonly string[],
  live: string | undefined,
): string {
  const where = locatePath(options.destination.location, options.bundlePath);
  const listed = available.length === 0 ? "none" : available.join(", ");
  if (options.to !== undefined) {
    if (!available.includes(options.to)) {
      throw new Error(`${where} has no committed release ${options.to} (releases: ${listed})`);
    }
    return options.to;
  }
  if (live === undefined) throw new Error(`${where} has no current release to roll back from`);
  const before = available.filter((id) => id < live);
  const previous = before[before.length - 1];
  if (previous === undefined) {
    throw new Error(`${where}: no committed release before ${live} (releases: ${listed})`);
  }
  return previous;
}
