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
import { DEFAULT_DESTINATION_LIMITS, type DestinationLimits } from "../protocol/limits.js";
import { type AdviceFlags, adviceCommand } from "./advice.js";
import { chooseTarget } from "./choose-target.js";
import { checkRelease, describeDrift, type ReleaseCheck, releaseIntact } from "./identities.js";
import { assertLayout, linksOf, snapshotPath } from "./layout.js";
import { ReleaseRefusedError } from "./refused.js";
import { finishRelease, type StoredRelease, stagedAmong, storedReleases } from "./releases.js";
import { ReleaseView } from "./view.js";

/** One committed release, as `inspect` and `rollback` show it. */
export interface ReleaseSummary {
  id: string;
  /** `current` links to it. */
  current: boolean;
  /** The state records it. */
  recorded: boolean;
  /** Staged: newer than the release in force, waiting to be promoted (docs/design/releases.md). */
  staged: boolean;
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
    staged: stagedAmong([id], live ?? recorded).length === 1,
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
  /**
   * The release to return to; without it, the previous publication: the newest committed release
   * before `current` that published another source (releases of the same source, which repairs
   * make, are passed over).
   */
  to?: string | undefined;
  dryRun: boolean;
  lease: LeaseOptions;
  signal?: AbortSignal | undefined;
  /** The destination's bounds, for the recovery taking the lease may run; default `DEFAULT_DESTINATION_LIMITS`. */
  limits?: DestinationLimits | undefined;
  /** Compare every file's digest with the target's snapshot, not only the recorded identities. */
  verify?: boolean | undefined;
  /** Switch to a target that changed since it was committed (the result says it did). */
  force?: boolean | undefined;
  /**
   * Restore a state that cannot be read from a committed snapshot (`reconcile-state --rebuild`
   * under the release layout): the current state must be invalid — a valid one is refused with
   * `state_valid` — and without `to` the target is the release `current` links to (the newest
   * committed one when `current` is missing or dangling).
   */
  restoreInvalidState?: boolean | undefined;
  /**
   * A promotion: the target is a staged release (newer than the one in force) — `to`, or with
   * `latest` the newest staged one; anything else is refused (`not_staged`, `no_staged_release`).
   */
  promote?: boolean | undefined;
  latest?: boolean | undefined;
  /** The flags the commands a refusal advises need (see `AdviceFlags`). */
  advice?: AdviceFlags | undefined;
}

export interface RollbackResult {
  /** The release `current` linked to before. */
  from: string | undefined;
  to: string;
  /** False when `current` already linked to it (and for a dry run). */
  switched: boolean;
  /** Milliseconds from holding the lease to `current` switched: the state and the link. */
  switchMs: number;
  /** What the check of the target found before the switch (`verify`: digests compared too). */
  check: ReleaseCheck;
  /** True when the target had changed since it was committed and `force` switched anyway. */
  forced: boolean;
  /**
   * True when the signal aborted once the state was committed: the switch was finished anyway
   * (a committed switch is never left half-done).
   */
  finishedAfterAbort?: boolean | undefined;
}

/**
 * Makes a committed release the one in force again: under the lease, the state becomes that
 * release's snapshot (a compare-and-swap), then `current` is switched to it. No output is
 * written or copied. The next run of the source that release published skips.
 */
export async function rollbackRelease(options: RollbackOptions): Promise<RollbackResult> {
  const { destination, bundlePath, signal } = options;
  linksOf(destination, bundlePath);
  await assertLayout(destination, bundlePath, "releases", {
    maxStateBytes: options.limits?.stateBytes.value,
    signal,
  });
  if (options.restoreInvalidState) {
    refuseMissingState(options, await readIfThere(destination, statePath(bundlePath), signal));
  }
  const look = new ReleaseView(destination, bundlePath);
  const [stored, live, recordedNow] = await Promise.all([
    storedReleases(destination, bundlePath, signal),
    look.live(signal),
    look.stateRelease(signal),
  ]);
  const planned = await chooseTarget(options, committedIds(stored), live, recordedNow);
  if (options.dryRun) {
    // A dry run of a restore answers what the restore would: nothing to do over a valid state.
    if (options.restoreInvalidState) {
      const path = statePath(bundlePath);
      refuseValidState(destination, path, await readIfThere(destination, path, signal));
    }
    const check = await checkTarget(options, planned);
    return { from: live, to: planned, switched: false, switchMs: 0, ...check };
  }
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
    const to = await chooseTarget(
      options,
      committedIds(await storedReleases(destination, bundlePath, signal)),
      from,
      await view.stateRelease(signal),
    );
    const path = statePath(bundlePath);
    let current: { bytes: Uint8Array; version: string } | undefined;
    try {
      current = await destination.readVersioned(path, { signal });
    } catch (error) {
      if (!isStorageError(error, "not_found")) throw error;
    }
    if (options.restoreInvalidState) {
      refuseMissingState(options, current?.bytes);
      refuseValidState(destination, path, current?.bytes);
    }
    const holder =
      current === undefined || options.restoreInvalidState
        ? undefined
        : peekSingleOwner(current.bytes);
    if (current !== undefined && holder === undefined && !options.restoreInvalidState) {
      // Not a state this version can read the owner of: corrupt, or not a single-owner state.
      throw new ReleaseRefusedError(
        "state_invalid",
        `${locatePath(destination.location, path)} cannot be read as a state; nothing was changed — restore it from the committed snapshot of the release current links to with \`distributor reconcile-state --rebuild\``,
      );
    }
    if (
      current !== undefined &&
      !options.restoreInvalidState &&
      (holder?.pipelineId !== options.owner.pipelineId ||
        holder?.destinationId !== options.owner.destinationId)
    ) {
      throw new ReleaseRefusedError(
        "not_owner",
        `${locatePath(destination.location, path)} is the state of pipeline ${holder?.pipelineId} destination ${holder?.destinationId}, not of this pipeline and destination; nothing was changed`,
      );
    }
    if (
      current !== undefined &&
      !options.restoreInvalidState &&
      peekReplacementMarker(current.bytes)
    ) {
      throw new ReleaseRefusedError(
        "publication_interrupted",
        `${locatePath(destination.location, path)} says a publication is under way (or was interrupted); nothing was changed — run the pipeline again (\`distributor run\`) to finish it, then roll back`,
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
      throw new ReleaseRefusedError(
        "not_owner",
        `${where} was not published by this pipeline and destination; nothing was changed`,
      );
    }
    const recorded = peekStateRelease(snapshot.bytes);
    if (recorded !== to) {
      throw new ReleaseRefusedError(
        "release_drift",
        `${where} records release ${recorded ?? "(none)"}, not ${to}; nothing was changed`,
      );
    }
    // The bytes about to go live are the ones committed (or the caller said to switch anyway).
    const checked = await checkTarget(options, to);
    if (!options.restoreInvalidState && from === to && (await view.stateRelease(signal)) === to) {
      return { from, to, switched: false, switchMs: 0, ...checked };
    }
    lease.assertHeld();
    await lease.confirm();
    await compareAndSwapState(destination, path, snapshot.bytes, current?.version, signal);
    // The state is committed: the switch is finished whatever the signal says now, so that
    // `current` agrees with the state and no later run finishes a switch its caller cancelled.
    await finishRelease(view, to, lease, undefined, snapshot.bytes);
    return {
      from,
      to,
      switched: true,
      switchMs: Math.round(performance.now() - started),
      ...checked,
      finishedAfterAbort: signal?.aborted ?? false,
    };
  } finally {
    await lease.release();
  }
}

/** A restore is refused where there is no state at all: `state_missing`. */
function refuseMissingState(options: RollbackOptions, bytes: Uint8Array | undefined): void {
  if (bytes !== undefined) return;
  const where = locatePath(options.destination.location, statePath(options.bundlePath));
  throw new ReleaseRefusedError(
    "state_missing",
    `${where} does not exist, so there is no state to rebuild; nothing was changed — to make a committed release live, run \`${adviceCommand("rollback", options.advice, "owner", "--to", "<id>")}\`; to publish the source, \`${adviceCommand("run", options.advice, "run")}\``,
  );
}

/** A restore is refused over a state that can be read: `state_valid`. */
function refuseValidState(
  destination: StorageBackend,
  path: string,
  bytes: Uint8Array | undefined,
): void {
  if (bytes === undefined || !readable(bytes)) return;
  throw new ReleaseRefusedError(
    "state_valid",
    `${locatePath(destination.location, path)} holds a valid state, so there is nothing to rebuild; nothing was changed`,
  );
}

/** The bytes at `path`; undefined where nothing is. */
async function readIfThere(
  destination: StorageBackend,
  path: string,
  signal: AbortSignal | undefined,
): Promise<Uint8Array | undefined> {
  try {
    return await destination.readFile(path, { signal });
  } catch (error) {
    if (isStorageError(error, "not_found")) return undefined;
    throw error;
  }
}

/** True when a state file's text parses as a state document. */
function readable(bytes: Uint8Array): boolean {
  try {
    parseDocument(Buffer.from(bytes).toString("utf8"));
    return true;
  } catch {
    return false;
  }
}

/**
 * Checks the target against what was committed; a target that changed is refused with
 * `release_drift` naming the files, unless `force` is set.
 */
async function checkTarget(
  options: RollbackOptions,
  to: string,
): Promise<{ check: ReleaseCheck; forced: boolean }> {
  const check = await checkRelease(options.destination, options.bundlePath, to, {
    limits: options.limits ?? DEFAULT_DESTINATION_LIMITS,
    verify: options.verify,
    signal: options.signal,
  });
  if (releaseIntact(check)) return { check, forced: false };
  if (check.directoryMissing) {
    throw new ReleaseRefusedError(
      "release_not_found",
      `release ${describeDrift(check)}; nothing was changed — choose a release that exists (distributor inspect --destination lists them)`,
      check,
    );
  }
  if (options.force) return { check, forced: true };
  const where = locatePath(options.destination.location, options.bundlePath);
  // A staged release that changed is no longer what was looked at: staging the source again
  // builds a fresh one to look at and promote.
  const way = options.promote
    ? `stage the source again with \`${adviceCommand("run", options.advice, "run", "--stage")}\` (a fresh release of it) and promote that one`
    : "choose another release, or pass --force to switch to it as it is now";
  throw new ReleaseRefusedError(
    "release_drift",
    `${where}: release ${describeDrift(check)} since it was committed; current was left as it was — ${way}`,
    check,
  );
}
