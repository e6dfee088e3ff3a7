import { isReleaseId, parseSingleOwnerState, peekStateRelease } from "@distributor/state";
import {
  isStorageError,
  isTempFileName,
  mapBounded,
  relativeTo,
  type StorageBackend,
  statePath,
} from "@distributor/storage";
import type { LeaseGuard } from "../protocol/lease-guard.js";
import { type DestinationLimit, walkWithin } from "../protocol/limits.js";
import { recordIdentities } from "./identities.js";
import {
  currentLinkPath,
  identitiesPath,
  linksOf,
  linkText,
  liveRelease,
  releaseDirectory,
  releasesPrefix,
  snapshotPath,
  stagingStatePath,
} from "./layout.js";
import { liveRecordPath, wentLive, writeLiveRecord } from "./live-records.js";
import { previousPublication } from "./sources.js";
import { type CarryMethod, ReleaseView } from "./view.js";

/** What lies in `releases/`: each release directory and whether its snapshot is there. */
export interface StoredRelease {
  id: string;
  /** `releases/<id>/` exists. */
  directory: boolean;
  /** `releases/<id>.json` exists: the release was committed (only those are kept or restored). */
  snapshot: boolean;
  /** `releases/<id>.staging.json` exists: a run staging it has not finished (or died). */
  staging?: boolean;
  /** `releases/<id>.files.json` exists. */
  identities?: boolean;
}

const LEFTOVER_SUFFIXES = [
  [".staging.json", "staging"],
  [".files.json", "identities"],
] as const;

/** The release a staging state or identity record belongs to, by its file name. */
function leftoverOf(name: string): { id: string; kind: "staging" | "identities" } | undefined {
  for (const [suffix, kind] of LEFTOVER_SUFFIXES) {
    if (!name.endsWith(suffix)) continue;
    const id = name.slice(0, -suffix.length);
    return isReleaseId(id) ? { id, kind } : undefined;
  }
  return undefined;
}

/** Entries directly in `releases/` read at once; one per release and one per snapshot. */
const RELEASES_LISTING_LIMIT = 100_000;

/** The releases below a bundle path, oldest first (ids sort by the time they were made). */
export async function storedReleases(
  backend: StorageBackend,
  bundlePath: string,
  signal?: AbortSignal,
): Promise<StoredRelease[]> {
  return (await readReleases(backend, bundlePath, signal)).releases;
}

/** Temp files beside the releases are debris: under the lease nobody else writes there. */
async function removeTemps(
  inner: StorageBackend,
  temps: readonly string[],
  lease: LeaseGuard,
  signal: AbortSignal | undefined,
): Promise<void> {
  if (temps.length === 0) return;
  lease.assertHeld();
  await inner.deletePaths("", temps, { ignoreMissing: true, signal });
}

/**
 * What lies in `releases/`: the releases, oldest first, and the temp files directly in it (paths
 * from the destination root) that writes of snapshots or identity records killed before their
 * rename left.
 */
async function readReleases(
  backend: StorageBackend,
  bundlePath: string,
  signal?: AbortSignal,
): Promise<{ releases: StoredRelease[]; temps: string[] }> {
  const prefix = releasesPrefix(bundlePath);
  let entries: Awaited<ReturnType<StorageBackend["walk"]>>;
  try {
    entries = await backend.walk(prefix, { limit: RELEASES_LISTING_LIMIT, signal });
  } catch (error) {
    if (isStorageError(error, "not_found")) return { releases: [], temps: [] };
    throw error;
  }
  const found = new Map<string, StoredRelease>();
  const temps: string[] = [];
  for (const entry of entries) {
    const name = relativeTo(prefix, entry.path);
    if (entry.kind === "file" && isTempFileName(name)) {
      temps.push(entry.path);
      continue;
    }
    const pieces = entry.kind === "file" ? leftoverOf(name) : undefined;
    if (pieces !== undefined) {
      // A staging state or an identity record alone is what a run that was never committed (or
      // stalled past its lease) left: noted, so that the next preparation removes it.
      const release = found.get(pieces.id) ?? { id: pieces.id, directory: false, snapshot: false };
      release[pieces.kind] = true;
      found.set(pieces.id, release);
      continue;
    }
    const snapshot = entry.kind === "file" && name.endsWith(".json");
    const id = snapshot ? name.slice(0, -".json".length) : name;
    if (!isReleaseId(id) || (!snapshot && entry.kind !== "directory")) continue;
    const release = found.get(id) ?? { id, directory: false, snapshot: false };
    if (snapshot) release.snapshot = true;
    else release.directory = true;
    found.set(id, release);
  }
  const releases = [...found.values()].sort((left, right) => (left.id < right.id ? -1 : 1));
  return { releases, temps };
}

export interface PrepareOptions {
  lease: LeaseGuard;
  signal?: AbortSignal | undefined;
  /** Files hard-linked at once. */
  concurrency?: number | undefined;
  /** Entries a release may hold (the destination's listing bound). */
  entries: DestinationLimit;
}

/**
 * Under the lease, before the first write: the view's new release becomes a copy of the state's
 * release made of hard links (which keep each file's version), so that the plan — made against
 * the state's release — only writes what changed. First a release committed but not yet
 * switched to is finished (it is what the state describes), and directories of releases never
 * committed (a run died building them) are removed.
 */
export async function prepareRelease(view: ReleaseView, options: PrepareOptions): Promise<void> {
  const { inner, bundlePath, next } = view;
  const { signal, lease } = options;
  if (next === undefined) throw new Error("a release view that only reads builds nothing");
  if (view.prepared) {
    throw new Error(
      `another run changed ${statePath(bundlePath)} while release ${next} was being built; nothing was published — run again`,
    );
  }
  const recorded = await view.stateRelease(signal);
  // A recorded release whose directory is gone is not finished (never a link to nothing): the
  // plan, made against it, writes every file into the new release instead.
  if (
    recorded !== undefined &&
    recorded !== (await view.live(signal)) &&
    (await releaseDirectoryExists(inner, bundlePath, recorded, signal))
  ) {
    await finishRelease(view, recorded, lease, signal);
  }
  const { releases: stored, temps } = await readReleases(inner, bundlePath, signal);
  if (stored.some((release) => release.id === next && release.snapshot)) {
    throw new Error(`release ${next} was committed already below ${releasesPrefix(bundlePath)}`);
  }
  // Never committed: what killed runs left (the new release's own id among them, when a saved
  // plan's apply is tried again).
  const keep = new Set([recorded, await view.live(signal)]);
  const abandoned = stored.filter((release) => !release.snapshot && !keep.has(release.id));
  await removeTemps(inner, temps, lease, signal);
  for (const release of abandoned) {
    lease.assertHeld();
    await inner.deletePaths("", [identitiesPath(bundlePath, release.id)], {
      ignoreMissing: true,
      signal,
    });
    await inner.deletePrefix(releaseDirectory(bundlePath, release.id), {
      ignoreMissing: true,
      signal,
    });
  }
  // A staging state goes last: while it is there the release is known to be an unfinished one
  // (one beside a snapshot is what a run that committed its staged release left behind).
  for (const release of stored.filter((release) => release.staging)) {
    lease.assertHeld();
    await inner.deletePaths("", [stagingStatePath(bundlePath, release.id)], {
      ignoreMissing: true,
      signal,
    });
  }
  if (recorded !== undefined) await copyRelease(view, recorded, next, options);
  view.markPrepared();
}

/**
 * Every file of release `from` under the same path in the view's new release — but those changed
 * since `from` was committed: they are the view's hidden files, which the plan writes again.
 */
async function copyRelease(view: ReleaseView, from: string, next: string, options: PrepareOptions) {
  const { inner, bundlePath } = view;
  const links = linksOf(inner, bundlePath);
  const source = releaseDirectory(bundlePath, from);
  const target = releaseDirectory(bundlePath, next);
  let files: Awaited<ReturnType<StorageBackend["walk"]>>;
  try {
    files = await walkWithin(inner, source, options.entries, {
      recursive: true,
      signal: options.signal,
    });
  } catch (error) {
    // Gone: planning saw every file of it missing, and the plan writes them all.
    if (isStorageError(error, "not_found")) return;
    throw error;
  }
  const concurrency = options.concurrency ?? inner.writeConcurrency ?? 8;
  const changed = await view.changedFiles(from, options.signal);
  // A temp file in the release (a commit never leaves one; something else may have) is not
  // carried over into the next one.
  const carried = files.filter(
    (entry) =>
      entry.kind === "file" &&
      !isTempFileName(entry.path.slice(entry.path.lastIndexOf("/") + 1)) &&
      !changed.has(relativeTo(source, entry.path)),
  );
  // Clones where the filesystem makes them (an edit in place of one release then never reaches
  // another), hard links otherwise: the first file tells which.
  let method: CarryMethod = links.cloneFile === undefined ? "hard_link" : "clone";
  const carry = async (entry: (typeof carried)[number]) => {
    options.lease.assertHeld();
    const path = relativeTo(source, entry.path);
    const to = `${target}/${path}`;
    if (method === "clone" && links.cloneFile !== undefined) {
      try {
        await links.cloneFile(entry.path, to, { signal: options.signal });
        // A clone is a file of its own, with its own version: the view answers with the version
        // it was cloned from while it is unchanged, which is what the plan's kept outputs were
        // checked at — unless the original changed meanwhile (then which bytes were cloned is
        // not known, and the kept output's check fails the attempt).
        const [origin, made] = await Promise.all([
          inner.stat(entry.path, { signal: options.signal }),
          inner.stat(to, { signal: options.signal }),
        ]);
        view.noteClone(
          path,
          made.version,
          origin.version === entry.version ? entry.version : undefined,
        );
        return;
      } catch (error) {
        if (!isStorageError(error, "unsupported")) throw error;
        method = "hard_link";
      }
    }
    // A hard link keeps the file's version, which the plan's kept outputs were checked at.
    await links.hardLink(entry.path, to, { signal: options.signal });
  };
  const [first, ...rest] = carried;
  if (first !== undefined) await carry(first);
  await mapBounded(rest, concurrency, carry);
  view.carriedBy(method);
}

/**
 * Under the lease, once the state records release `id`: its snapshot (the state's bytes, what a
 * rollback restores) is written beside it, then `current` is switched to it. Both steps can be
 * repeated: a run that dies between them leaves the state naming `id`, and the next finishes.
 */
export async function finishRelease(
  view: ReleaseView,
  id: string,
  lease: LeaseGuard,
  signal?: AbortSignal,
  /** The state's bytes, when the caller just wrote them. */
  committed?: Uint8Array,
): Promise<void> {
  const { inner, bundlePath } = view;
  const bytes = committed ?? (await inner.readVersioned(statePath(bundlePath), { signal })).bytes;
  const recorded = peekStateRelease(bytes);
  if (recorded !== id) {
    throw new Error(
      `${statePath(bundlePath)} records release ${recorded ?? "(none)"}, not ${id}; current was left as it was`,
    );
  }
  // A snapshot once written is the release's committed state (a release is never changed):
  // only a run that died before writing it leaves it to write (rollbacks write none). The
  // identity record goes first, so that every release with a snapshot has one.
  // The run that died before may have left the temp file of a write beside the releases (the
  // identity record, the snapshot, the live record).
  const { temps } = await readReleases(inner, bundlePath, signal);
  await removeTemps(inner, temps, lease, signal);
  if ((await kindAt(inner, snapshotPath(bundlePath, id), signal)) === undefined) {
    lease.assertHeld();
    // Recorded once: identities written by the run that built the release are never replaced
    // (a snapshot lost since must not bless edits made since).
    if ((await kindAt(inner, identitiesPath(bundlePath, id), signal)) === undefined) {
      // A release another run built and died before recording: its files may have changed since
      // that run's commit (a power cut under fsync: false empties them), so only files that
      // still hold the recorded bytes are identified; the others are never trusted.
      const recorded = view.next === id ? undefined : recordedDigests(bytes);
      await recordIdentities(inner, bundlePath, id, view.limits, signal, view.carried, recorded);
    }
    lease.assertHeld();
    await inner.writeFile(snapshotPath(bundlePath, id), bytes, {
      overwrite: true,
      commit: true,
      signal,
    });
  }
  const links = linksOf(inner, bundlePath);
  // Never a link to nothing: a release whose directory went (removed by hand, or a late commit
  // of a run whose half-built release another run removed) is refused, naming the way out.
  if ((await kindAt(inner, releaseDirectory(bundlePath, id), signal)) !== "directory") {
    throw new Error(
      `${statePath(bundlePath)} records release ${id}, but ${releaseDirectory(bundlePath, id)} is missing; current was left as it was — roll back to a committed release (distributor rollback --to), or move ${statePath(bundlePath)} away and publish again`,
    );
  }
  // Recorded as gone live before the switch (a switch that then fails is finished by the next
  // run, the state recording it): "the release before" is only ever one that went live.
  // (Where `current` links to it already, it went live before: nothing to note.)
  if ((await liveRelease(inner, bundlePath, signal)) !== id) {
    lease.assertHeld();
    await writeLiveRecord(inner, bundlePath, id, new Date(), signal);
  }
  // Confirmed just before the switch, and again after it (below): a link has no compare-and-swap.
  await lease.confirm();
  await links.switchLink(currentLinkPath(bundlePath), linkText(id), { signal });
  view.switched(id);
  // A link has no compare-and-swap: a run that stalled just before its switch, past its lease,
  // may have switched back under a newer run's commit. The lease, still ours, rules that out;
  // otherwise `current` is put back on the release the state records, and the run fails.
  try {
    await lease.confirm();
  } catch (error) {
    const { bytes: now } = await inner.readVersioned(statePath(bundlePath), { signal });
    const recorded = peekStateRelease(now);
    if (recorded !== undefined && recorded !== id) {
      await links.switchLink(currentLinkPath(bundlePath), linkText(recorded), { signal });
      view.switched(recorded);
    }
    throw error;
  }
}

/**
 * Retention: the newest `keep` committed releases stay (the one in force among them, as
 * Capistrano's `keep_releases` counts), and always the one `current` links to, the one the
 * state records and the newest release of the publication before the one in force; the others go
 * (and every release whose directory is gone), snapshot first (a directory without one is
 * never restored, and the next release's preparation removes it should this stop half-way).
 */
export async function retainReleases(
  view: ReleaseView,
  keep: number,
  lease: LeaseGuard,
  signal?: AbortSignal,
  keepStaged?: number,
): Promise<string[]> {
  const { inner, bundlePath } = view;
  const retired = await releasesToRetire(view, keep, signal, keepStaged);
  for (const id of retired) {
    lease.assertHeld();
    await inner.deletePaths("", [snapshotPath(bundlePath, id)], { ignoreMissing: true, signal });
    await inner.deletePaths("", [identitiesPath(bundlePath, id), liveRecordPath(bundlePath, id)], {
      ignoreMissing: true,
      signal,
    });
    await inner.deletePrefix(releaseDirectory(bundlePath, id), { ignoreMissing: true, signal });
  }
  return retired;
}

/**
 * The committed releases retention removes (see `retainReleases`), oldest first, read without
 * changing anything: a run that only skips asks it to finish a retention a killed run left.
 */
export async function releasesToRetire(
  view: ReleaseView,
  keep: number,
  signal?: AbortSignal,
  /** Staged releases kept whatever `keep` says: the newest this many; all when undefined. */
  keepStaged?: number,
): Promise<string[]> {
  const { inner, bundlePath } = view;
  const committed = (await storedReleases(inner, bundlePath, signal)).filter((r) => r.snapshot);
  if (committed.length <= keep && committed.every((release) => release.directory)) return [];
  const live = await view.live(signal);
  // The live state's release, never a staging view's (which records the release just staged):
  // staged releases are the ones newer than the release in force.
  const recorded = await new ReleaseView(inner, bundlePath).stateRelease(signal);
  const protect = new Set([recorded, live, await view.stateRelease(signal)]);
  // A staged release (newer than the one in force) awaits an operator's decision: retention
  // leaves it alone unless `releases.keep_staged` bounds how many wait.
  const staged = stagedAmong(
    committed.filter((release) => release.directory).map((release) => release.id),
    live ?? recorded,
  );
  for (const id of keepStaged === undefined ? staged : staged.slice(staged.length - keepStaged)) {
    protect.add(id);
  }
  // Repairs and re-publications of the source in force make releases of their own: the newest
  // release of the publication before it stays whatever `keep` says, so that a rollback to the
  // previous publication is always possible.
  if (live !== undefined && committed.length > keep) {
    // Of the releases that went live: a staged release never promoted is not "the one before".
    const ids = await wentLive(
      inner,
      bundlePath,
      committed.map((release) => release.id),
      signal,
    );
    protect.add(await previousPublication(inner, bundlePath, ids, live, signal));
  }
  // A release whose directory is gone can never be gone back to: its snapshot goes too.
  const whole = committed.filter((release) => release.directory);
  const newest = new Set(whole.slice(-keep).map((release) => release.id));
  return committed
    .filter((release) => !newest.has(release.id) && !protect.has(release.id))
    .map((release) => release.id);
}

/**
 * Of `committed` (ids, oldest first), the staged releases: those newer than the release in force
 * (`base`: what `current` links to, else what the state records; every one when neither is).
 */
export function stagedAmong(committed: readonly string[], base: string | undefined): string[] {
  return committed.filter((id) => base === undefined || id > base);
}

/** `releases/<id>/` is there. */
export async function releaseDirectoryExists(
  backend: StorageBackend,
  bundlePath: string,
  id: string,
  signal?: AbortSignal,
): Promise<boolean> {
  return (await kindAt(backend, releaseDirectory(bundlePath, id), signal)) === "directory";
}

/** `releases/<id>.json` is there. */
export async function snapshotExists(
  backend: StorageBackend,
  bundlePath: string,
  id: string,
  signal?: AbortSignal,
): Promise<boolean> {
  return (await kindAt(backend, snapshotPath(bundlePath, id), signal)) === "file";
}

/** What kind of entry stands at `path`; undefined when nothing does. */
async function kindAt(backend: StorageBackend, path: string, signal?: AbortSignal) {
  try {
    return (await backend.stat(path, { signal })).kind;
  } catch (error) {
    if (isStorageError(error, "not_found")) return undefined;
    throw error;
  }
}

/** The digest each output of the state `bytes` records, by path. */
function recordedDigests(bytes: Uint8Array): ReadonlyMap<string, string> {
  const state = parseSingleOwnerState(Buffer.from(bytes).toString("utf8"));
  return new Map(state.outputs.map((output) => [output.path, output.sha256]));
}
