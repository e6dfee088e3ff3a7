import type { Readable } from "node:stream";
import {
  isSharedRootState,
  type OutputMetadata,
  removeMissingOutputs,
  removeMissingOwnerOutputs,
  replacementMarkers,
  type SharedRootState,
  type StateDocument,
  sameOwnerScope,
  truncateToSecond,
  withoutReplacementMarkers,
  withReplacementMarker,
} from "@distributor/state";
import {
  fanOutSignal,
  isStorageError,
  joinPrefix,
  LEASE_FILE_NAME,
  mapBounded,
  relativeTo,
  STATE_FILE_NAME,
  type StorageBackend,
  statePath,
} from "@distributor/storage";
import { metadataOptions } from "../content/metadata.js";
import { storedFile } from "../content/stored-digest.js";
import { compareAndSwapState, StateChangedError } from "./commit-state.js";
import type { LeaseGuard } from "./lease-guard.js";
import { DEFAULT_DESTINATION_LIMITS, type DestinationLimits } from "./limits.js";
import {
  deleteEach,
  fitsBackend,
  listDirectory,
  parentOf,
  removeEmptyDirectories,
  tempFiles,
} from "./recovery-cleanup.js";
import { encodeStateFile, readDestinationStatus } from "./state-file.js";

/** What recovering a stale lease removed. */
export interface RecoveryReport {
  /** Journaled paths no state records (bundle-relative), deleted. */
  deleted: string[];
  /** Temp files of the reserved pattern found in the journaled directories, deleted. */
  tempFiles: string[];
  /** Journaled paths kept because the state records them, or the state could not be read. */
  kept: string[];
  /**
   * Paths the dead run replaced in place whose bytes no longer matched their records: deleted,
   * and their records dropped from the state.
   */
  dropped: string[];
}

/** What a run that died left to recover, and how the recovery may go about it. */
export interface BrokenRun {
  /** Paths it journaled (bundle-relative): created, or about to be. */
  journal: readonly string[];
  /** Directories it wrote to, where its temp files may lie. */
  directories: readonly string[];
  /** Of the journaled paths, those it was replacing in place. */
  overwrites?: readonly string[] | undefined;
  /** Its run id, which a state it marked mid-replacement names. */
  brokenRunId?: string | undefined;
  signal?: AbortSignal | undefined;
  /** The lease the recovery holds; deletes are checked against it. */
  lease?: RecoveringLease | undefined;
  limits?: DestinationLimits | undefined;
}

/**
 * Undoes what a run that died while holding the lease left behind (docs/design/commit-protocol.md): the journaled paths
 * that no state records, its unfinished multipart uploads, reserved-pattern temp files in the
 * directories it wrote to, and those directories when they are left empty. Nothing else is
 * touched — never an unmanaged entry. When the state cannot be read, nothing journaled is
 * deleted (what it records cannot be known), only temp files. Deletes are fenced on the versions
 * the listing showed and checked against `lease` when one is given. The state is read and written,
 * and directories listed, within the destination's `limits`.
 */
export async function recoverJournal(
  backend: StorageBackend,
  bundlePath: string,
  broken: BrokenRun,
): Promise<RecoveryReport> {
  const { journal, signal, lease, brokenRunId } = broken;
  let { directories, overwrites = [] } = broken;
  const limits = broken.limits ?? DEFAULT_DESTINATION_LIMITS;
  // A path longer than the store can hold was never created there (a run that journaled it
  // died on it): nothing to undo, and asking the store about it would fail every recovery.
  const holds = (path: string) => fitsBackend(backend, joinPrefix(bundlePath, path));
  const journaled = [...new Set(journal)].filter(
    (path) => path !== STATE_FILE_NAME && path !== LEASE_FILE_NAME && holds(path),
  );
  directories = directories.filter(holds);
  overwrites = overwrites.filter(holds);
  // Killed multipart uploads hold hidden parts under journaled paths: abort them (S3).
  if (backend.abortUploads !== undefined && journaled.length > 0) {
    lease?.assertHeld();
    await backend.abortUploads(
      journaled.map((path) => joinPrefix(bundlePath, path)),
      { signal },
    );
  }
  // What to delete is decided from the state the fence replaces: a late commit of the previous
  // holder either landed before (and is what was read) or refuses after. Should it land between
  // the read and the fence, the fence refuses, and the decision is made again.
  for (let attempt = 1; ; attempt++) {
    try {
      return await recoverOnce(backend, bundlePath, journaled, directories, overwrites, {
        signal,
        lease,
        brokenRunId,
        limits,
      });
    } catch (error) {
      if (!(error instanceof StateChangedError) || attempt >= 3) throw error;
    }
  }
}

async function recoverOnce(
  backend: StorageBackend,
  bundlePath: string,
  journaled: readonly string[],
  directories: readonly string[],
  overwrites: readonly string[],
  {
    signal,
    lease,
    brokenRunId,
    limits,
  }: {
    signal: AbortSignal | undefined;
    lease: RecoveringLease | undefined;
    brokenRunId: string | undefined;
    limits: DestinationLimits;
  },
): Promise<RecoveryReport> {
  const { status, version } = await readDestinationStatus(
    backend,
    bundlePath,
    signal,
    limits.stateBytes,
  );
  const report: RecoveryReport = { deleted: [], tempFiles: [], kept: [], dropped: [] };
  // Every owner's records count: a shared root's other owners' paths are never removed.
  const recorded = new Set((status.state?.outputs ?? []).map((output) => output.path));
  const readable = status.stateError === undefined;
  for (const path of journaled) {
    if (!readable || recorded.has(path)) report.kept.push(path);
    else report.deleted.push(path);
  }
  const looked = new Set(["", ...directories, ...report.deleted.map(parentOf)]);
  const versions = new Map<string, string>();
  const width = backend.writeConcurrency ?? 4;
  const scope = fanOutSignal(signal, width);
  const listings = await mapBounded([...looked], width, (directory) =>
    listDirectory(backend, bundlePath, directory, scope.signal, limits.entries),
  ).finally(() => scope.dispose());
  for (const entries of listings) {
    report.tempFiles.push(...tempFiles(bundlePath, entries));
    for (const entry of entries) {
      if (entry.version !== undefined) {
        versions.set(relativeTo(bundlePath, entry.path), entry.version);
      }
    }
  }
  const fenced = new Map(
    report.deleted.flatMap((path) => {
      const seen = versions.get(path);
      return seen === undefined ? [] : [[path, seen] as const];
    }),
  );
  // The previous holder may only be stalled, with writes still to land: first fence them off
  // (its replacements in place and its state commit), then delete what it left.
  const state = status.state;
  let fencedState: FencedState | undefined;
  if (readable && state !== undefined && version !== undefined) {
    if (journaled.length + overwrites.length > 0 || replacementMarkers(state).length > 0) {
      const read = { state, version };
      const replaced = [...overwrites, ...unjournaledReplacements(state, brokenRunId)];
      fencedState = await fenceStateAndReplaced(backend, bundlePath, read, replaced, {
        signal,
        lease,
        limits,
      });
      report.dropped = fencedState.dropped;
    }
  }
  lease?.assertHeld();
  await deleteEach(backend, bundlePath, report.deleted, signal, fenced);
  await deleteEach(backend, bundlePath, report.tempFiles, signal);
  await removeEmptyDirectories(backend, bundlePath, directories, signal);
  if (fencedState?.marked === true) {
    // Everything the dead run left is gone: the marker this recovery kept goes last.
    lease?.assertHeld();
    const bytes = encodeStateFile(
      backend,
      statePath(bundlePath),
      withoutReplacementMarkers(fencedState.state),
      limits.stateBytes,
    );
    await compareAndSwapState(backend, statePath(bundlePath), bytes, fencedState.version, signal);
  }
  return report;
}

/** The state a recovery wrote while fencing, and whether it kept a `replacing` marker. */
interface FencedState {
  dropped: string[];
  state: StateDocument;
  version: string;
  marked: boolean;
}

/**
 * Fences off a previous holder that may be stalled rather than dead (docs/design/commit-protocol.md): its writes were
 * all conditional on versions it saw, so recovery moves those versions on.
 * - Each path it was replacing in place (or deleting ahead of its writes) is hashed. Bytes other
 *   than the record's, or none, are not what the state describes: the file goes and its record
 *   is dropped, since no source that could rewrite it is at hand (a merge that keeps the record
 *   would never rewrite it). Bytes equal to the record are written again in place, so that their
 *   version changes and a replacement still on its way refuses (where versions derive from the
 *   bytes alone, as on S3, this cannot fence). A replacement that lands meanwhile shows as a
 *   moved version, and the path is looked at again.
 * - The state the caller read is rewritten with a new `updated_at` (and without the dropped
 *   records), so that a commit still on its way — a compare-and-swap on the version the previous
 *   holder planned from — refuses instead of recording outputs this recovery removes; if that
 *   commit landed since the caller's read, this write refuses (`StateChangedError`) instead.
 * Paths it drops are journaled before the state write, so a crash leaves them for the next
 * recovery. Returns the paths whose records were dropped.
 */
async function fenceStateAndReplaced(
  backend: StorageBackend,
  bundlePath: string,
  { state, version }: { state: StateDocument; version: string },
  overwrites: readonly string[],
  {
    signal,
    lease,
    limits,
  }: {
    signal: AbortSignal | undefined;
    lease: RecoveringLease | undefined;
    limits: DestinationLimits;
  },
): Promise<FencedState> {
  const records = new Map(state.outputs.map((output) => [output.path, output]));
  // Path → the version to delete it at (undefined: nothing stored there any more).
  const stale = new Map<string, string | undefined>();
  const differs = (found: { sha256: string; size: number }, record: StateRecord) =>
    found.sha256 !== record.sha256 || found.size !== record.size;
  // Each path is a read and perhaps a rewrite: as many at once as the destination writes
  // outputs, so that recovering a large replacement on a remote store takes its time in
  // parallel round trips rather than one after another. The results keep the input order.
  const looked = [...new Set(overwrites)].filter((path) => records.has(path));
  const width = backend.writeConcurrency ?? 4;
  const scope = fanOutSignal(signal, width);
  let verdicts: Array<{ path: string; stale: boolean; version: string | undefined }>;
  try {
    verdicts = await mapBounded(looked, width, async (path) => {
      const record = records.get(path) as StateRecord;
      const target = joinPrefix(bundlePath, path);
      let found = await storedDigest(backend, target, scope.signal);
      if (found !== undefined && !differs(found, record)) {
        lease?.assertHeld();
        if (await rewriteInPlace(backend, target, found.version, record.metadata, scope.signal)) {
          return { path, stale: false, version: undefined };
        }
        found = await storedDigest(backend, target, scope.signal);
        if (found !== undefined && !differs(found, record)) {
          return { path, stale: false, version: undefined };
        }
      }
      return { path, stale: true, version: found?.version };
    });
  } finally {
    scope.dispose();
  }
  for (const verdict of verdicts) {
    if (verdict.stale) stale.set(verdict.path, verdict.version);
  }
  const paths = [...stale.keys()];
  const removal =
    paths.length === 0
      ? { state }
      : isSharedRootState(state)
        ? removeRecordsAtPaths(state, paths)
        : removeMissingOutputs(state, paths);
  if (paths.length > 0) await lease?.journal(paths, []);
  lease?.assertHeld();
  await lease?.confirm();
  // Every record left describes the bytes there now. A `replacing` marker stays, as this
  // recovery's, until what the dead run left is deleted too: a run killed before that must not
  // leave those files to runs that read the state alone and skip.
  const marked = lease !== undefined && replacementMarkers(removal.state).length > 0;
  const next = {
    ...(marked ? retargetedMarkers(removal.state, lease.runId) : removal.state),
    updatedAt: bumpedUpdatedAt(state.updatedAt),
  };
  const bytes = encodeStateFile(backend, statePath(bundlePath), next, limits.stateBytes);
  const written = await compareAndSwapState(backend, statePath(bundlePath), bytes, version, signal);
  const present = new Map(
    [...stale].flatMap(([path, seen]) => (seen === undefined ? [] : [[path, seen] as const])),
  );
  await deleteEach(backend, bundlePath, [...present.keys()], signal, present);
  return { dropped: paths, state: next, version: written, marked };
}

/** Every `replacing` marker of `state` rewritten as run `runId`'s (a recovery's). */
function retargetedMarkers(state: StateDocument, runId: string): StateDocument {
  const marker = { runId, startedAt: truncateToSecond(new Date()) };
  let next = withoutReplacementMarkers(state);
  if (!isSharedRootState(next)) return { ...next, replacing: marker };
  for (const { owner } of replacementMarkers(state)) {
    if (owner !== undefined) next = withReplacementMarker(next, owner, marker);
  }
  return next;
}

type StateRecord = StateDocument["outputs"][number];

/**
 * The recorded paths a `replacing` marker covers when no journal at hand lists what its run
 * replaced (the marker is not the broken lease's run's: its lease went without a recovery):
 * every record of the marked owner is looked at.
 */
function unjournaledReplacements(state: StateDocument, brokenRunId: string | undefined): string[] {
  const paths: string[] = [];
  for (const { owner, marker } of replacementMarkers(state)) {
    if (marker.runId === brokenRunId) continue;
    for (const output of state.outputs) {
      if (owner === undefined || ("owner" in output && sameOwnerScope(output.owner, owner))) {
        paths.push(output.path);
      }
    }
  }
  return paths;
}

/** A later `updated_at` (whole seconds), so the rewritten state's bytes differ from before. */
function bumpedUpdatedAt(previous: Date): Date {
  const now = truncateToSecond(new Date());
  return now.getTime() > previous.getTime() ? now : new Date(previous.getTime() + 1000);
}

/**
 * Writes a file's own bytes again, as a compare-and-swap, so that its version moves on; false
 * when it moved (or went) meanwhile, which the caller looks at again.
 */
async function rewriteInPlace(
  backend: StorageBackend,
  path: string,
  version: string,
  metadata: OutputMetadata | undefined,
  signal: AbortSignal | undefined,
): Promise<boolean> {
  let stream: Readable;
  try {
    stream = await backend.openRead(path, { signal });
  } catch (error) {
    if (isStorageError(error, "not_found")) return false;
    throw error;
  }
  try {
    // Stored again as the state describes it: with the record's metadata, which a plain write
    // would drop on a backend that keeps metadata per object.
    await backend.writeFile(path, stream, {
      ifMatch: version,
      ...metadataOptions(metadata),
      signal,
    });
    return true;
  } catch (error) {
    if (!isStorageError(error, "conflict")) throw error;
    return false;
  } finally {
    stream.destroy();
  }
}

/** What recovery needs of the lease it holds: checks, and journaling what it will delete. */
export interface RecoveringLease extends LeaseGuard {
  journal(paths: readonly string[], directories: readonly string[]): Promise<void>;
}

/** Every owner's records at `paths` dropped: a shared root's replaced paths had one owner each. */
function removeRecordsAtPaths(state: SharedRootState, paths: readonly string[]) {
  let current = state;
  for (const scope of state.owners.map((owner) => owner.scope)) {
    current = removeMissingOwnerOutputs(current, scope, paths).state;
  }
  return { state: current };
}

/** Digest, size and version of a stored file, streamed; undefined when it is gone. */
async function storedDigest(
  backend: StorageBackend,
  path: string,
  signal: AbortSignal | undefined,
  attempt = 1,
): Promise<{ sha256: string; size: number; version: string } | undefined> {
  const found = await storedFile(backend, path, signal);
  // Nothing there, or no file's bytes (a directory, a link): not what any record describes.
  if (found.kind !== "file") return undefined;
  // Changed while it was read: the digest may be of either version, so look again.
  const after = await backend.stat(path, { signal }).catch((error: unknown) => {
    if (isStorageError(error, "not_found")) return undefined;
    throw error;
  });
  if (after === undefined) return undefined;
  if (after.version !== found.version && attempt < 3) {
    return storedDigest(backend, path, signal, attempt + 1);
  }
  return { sha256: found.sha256, size: found.size, version: found.version ?? "" };
}
