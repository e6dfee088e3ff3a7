import { isSharedRootState, parseDocument } from "@distributor/state";
import {
  isStorageError,
  isTempFileName,
  locatePath,
  mapBounded,
  relativeTo,
  type StorageBackend,
} from "@distributor/storage";
import { storedFile } from "../content/stored-digest.js";
import { DEFAULT_DESTINATION_LIMITS, type DestinationLimits } from "../protocol/limits.js";
import { identitiesPath, releaseDirectory, snapshotPath } from "./layout.js";

// What identifies each stored file of a release at the time it was committed
// (docs/design/releases.md, "Edits in place"): the store's version token — on a
// local directory the inode, size and modification time to the microsecond; over SFTP the size
// and modification time. An edit in place (`>`, `cp` over it, `rsync --inplace`) changes the
// token of every release sharing the inode; a rename over the name gives the path a new inode.
// The change time is left out on purpose: making a hard link changes it, and every release
// after the first is made of hard links.

/** The identity record's format, so that a later version can tell what it reads. */
const IDENTITIES_FORMAT = 1;

/** Path (relative to the release directory) → version token, as committed. */
export type ReleaseIdentities = ReadonlyMap<string, string>;

/** One stored file of a release: its version token now, and its size. */
export interface ReleaseFile {
  version: string | undefined;
  size: number;
}

/** Every file of release `id` with its version token and size now, from one listing. */
export async function listReleaseFiles(
  backend: StorageBackend,
  bundlePath: string,
  id: string,
  limits: DestinationLimits = DEFAULT_DESTINATION_LIMITS,
  signal?: AbortSignal,
): Promise<Map<string, ReleaseFile> | undefined> {
  const directory = releaseDirectory(bundlePath, id);
  let entries: Awaited<ReturnType<StorageBackend["walk"]>>;
  try {
    entries = await backend.walk(directory, {
      recursive: true,
      limit: limits.entries.value,
      signal,
    });
  } catch (error) {
    if (isStorageError(error, "not_found")) return undefined;
    throw error;
  }
  const files = new Map<string, ReleaseFile>();
  for (const entry of entries) {
    if (entry.kind !== "file") continue;
    const name = entry.path.slice(entry.path.lastIndexOf("/") + 1);
    if (isTempFileName(name)) continue;
    files.set(relativeTo(directory, entry.path), { version: entry.version, size: entry.size });
  }
  return files;
}

/** Recorded for a file that did not hold its committed bytes when the record was written. */
const UNTRUSTED_IDENTITY = "untrusted";

/**
 * Writes release `id`'s identity record: what identifies each of its files now. Called under the
 * lease once the state records the release and before its snapshot is written, so that every
 * committed release (one with a snapshot) has one.
 */
export async function recordIdentities(
  backend: StorageBackend,
  bundlePath: string,
  id: string,
  limits: DestinationLimits = DEFAULT_DESTINATION_LIMITS,
  signal?: AbortSignal,
  /** How the files kept from the previous release were carried over, when this run built it. */
  carried?: "clone" | "hard_link" | undefined,
  /**
   * When given, a file whose SHA-256 is not the one recorded here for its path, or that is not
   * there at all, is recorded with an identity no file has, so that it is never trusted.
   */
  digests?: ReadonlyMap<string, string>,
): Promise<void> {
  const files = (await listReleaseFiles(backend, bundlePath, id, limits, signal)) ?? new Map();
  // Without a prototype, so that a file named `__proto__` is a key like any other.
  const record: Record<string, string> = Object.create(null);
  for (const [path, { version }] of files) {
    // A store that gives no version token identifies nothing: such a file is never trusted.
    if (version === undefined) continue;
    if (digests !== undefined) {
      const stored = await storedFile(
        backend,
        `${releaseDirectory(bundlePath, id)}/${path}`,
        signal,
      );
      if (stored?.kind !== "file" || stored.sha256 !== digests.get(path)) {
        // An identity no file has: a check hashes it and finds it changed.
        record[path] = UNTRUSTED_IDENTITY;
        continue;
      }
    }
    record[path] = version;
  }
  // A recorded file the release no longer holds (a power cut under fsync: false can lose its
  // name) is recorded too, so that a check finds it missing: a check compares the files the
  // record names, and reads the snapshot only when one of them changed.
  for (const path of digests?.keys() ?? []) {
    if (!files.has(path)) record[path] = UNTRUSTED_IDENTITY;
  }
  const text = JSON.stringify({
    format: IDENTITIES_FORMAT,
    release: id,
    ...(carried === undefined ? {} : { carried }),
    files: record,
  });
  await backend.writeFile(identitiesPath(bundlePath, id), text, {
    overwrite: true,
    commit: true,
    signal,
  });
}

/** Release `id`'s identity record; undefined when it has none (committed before records were kept). */
export async function readIdentities(
  backend: StorageBackend,
  bundlePath: string,
  id: string,
  limits: DestinationLimits = DEFAULT_DESTINATION_LIMITS,
  signal?: AbortSignal,
): Promise<ReleaseIdentities | undefined> {
  const path = identitiesPath(bundlePath, id);
  let bytes: Uint8Array;
  try {
    bytes = await backend.readFile(path, { signal, maxBytes: limits.stateBytes.value });
  } catch (error) {
    if (isStorageError(error, "not_found")) return undefined;
    throw error;
  }
  const where = locatePath(backend.location, path);
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(bytes).toString("utf8"));
  } catch (error) {
    throw new ReleaseRecordError(`${where} is not valid JSON: ${(error as Error).message}`);
  }
  const document = parsed as { format?: unknown; release?: unknown; files?: unknown };
  if (document.format !== IDENTITIES_FORMAT || document.release !== id) {
    throw new ReleaseRecordError(
      `${where} is not the identity record of release ${id} (format ${String(document.format)}, release ${String(document.release)})`,
    );
  }
  if (typeof document.files !== "object" || document.files === null) {
    throw new ReleaseRecordError(`${where} has no "files" object`);
  }
  const identities = new Map<string, string>();
  for (const [path, version] of Object.entries(document.files)) {
    if (typeof version === "string") identities.set(path, version);
  }
  return identities;
}

/** A release's identity record or snapshot that cannot be read as one. */
export class ReleaseRecordError extends Error {
  override readonly name = "ReleaseRecordError";
  readonly code = "release_drift";
}

/** How one release compares with what was committed. */
export interface ReleaseCheck {
  id: string;
  /** Whether the release has an identity record (releases committed before records were kept have none). */
  identities: boolean;
  /** Whether every file's digest was compared with the snapshot's records (`--verify`). */
  verified: boolean;
  /**
   * Files whose bytes are no longer the committed ones: their identity differs and so does their
   * digest (with `verify`, their digest differs whatever their identity).
   */
  changed: string[];
  /** Files committed in the release and no longer there. */
  missing: string[];
  /** Files in the release directory that were not committed there. */
  added: string[];
  /** The release directory itself is gone. */
  directoryMissing: boolean;
}

/** True when a check found nothing that differs from what was committed. */
export function releaseIntact(check: ReleaseCheck): boolean {
  return (
    !check.directoryMissing &&
    check.changed.length === 0 &&
    check.missing.length === 0 &&
    check.added.length === 0
  );
}

export interface CheckReleaseOptions {
  limits?: DestinationLimits | undefined;
  /** Compare every file's SHA-256 with the snapshot's records too. */
  verify?: boolean | undefined;
  /** Files hashed at once under `verify`. */
  concurrency?: number | undefined;
  signal?: AbortSignal | undefined;
}

/**
 * Compares release `id` with what was committed. Each file's identity is compared with its record
 * (one listing); a file whose identity changed is then hashed and compared with the snapshot's
 * digest, so that a release copied or restored elsewhere (new inodes, same bytes) is intact and
 * an edit is not — with `verify`, every recorded output is hashed. A release without an identity
 * record (committed by an earlier version) is compared by the snapshot's sizes unless `verify`.
 */
export async function checkRelease(
  backend: StorageBackend,
  bundlePath: string,
  id: string,
  options: CheckReleaseOptions = {},
): Promise<ReleaseCheck> {
  const { signal } = options;
  const limits = options.limits ?? DEFAULT_DESTINATION_LIMITS;
  const check: ReleaseCheck = {
    id,
    identities: false,
    verified: options.verify === true,
    changed: [],
    missing: [],
    added: [],
    directoryMissing: false,
  };
  const files = await listReleaseFiles(backend, bundlePath, id, limits, signal);
  if (files === undefined) {
    check.directoryMissing = true;
    return check;
  }
  const identities = await readIdentities(backend, bundlePath, id, limits, signal);
  const changed = new Set<string>();
  const missing = new Set<string>();
  /** Files whose identity is not the recorded one: their bytes decide. */
  const suspects = new Set<string>();
  if (identities !== undefined) {
    check.identities = true;
    for (const [path, version] of identities) {
      const found = files.get(path);
      if (found === undefined) missing.add(path);
      else if (found.version !== version) suspects.add(path);
    }
    for (const path of files.keys()) if (!identities.has(path)) check.added.push(path);
  }
  if (options.verify || identities === undefined || suspects.size > 0) {
    const records = await snapshotRecords(backend, bundlePath, id, limits, signal);
    const recorded = new Set(records.map((record) => record.path));
    // A suspect the snapshot records nothing of cannot be shown intact.
    for (const path of suspects) if (!recorded.has(path)) changed.add(path);
    const hashing = records.filter(
      (record) => files.has(record.path) && (options.verify || suspects.has(record.path)),
    );
    const directory = releaseDirectory(bundlePath, id);
    const hashed = await mapBounded(hashing, options.concurrency ?? 8, (record) =>
      storedFile(backend, `${directory}/${record.path}`, signal),
    );
    hashing.forEach((record, index) => {
      const stored = hashed[index];
      if (stored === undefined || stored.kind !== "file") missing.add(record.path);
      else if (stored.sha256 !== record.sha256 || stored.size !== record.size) {
        changed.add(record.path);
      }
    });
    for (const record of records) {
      const found = files.get(record.path);
      if (found === undefined) missing.add(record.path);
      else if (identities === undefined && !options.verify && found.size !== record.size) {
        changed.add(record.path);
      }
    }
  }
  check.changed = [...changed].sort();
  check.missing = [...missing].sort();
  check.added.sort();
  return check;
}

/** The outputs release `id`'s snapshot records (path, digest, size). */
async function snapshotRecords(
  backend: StorageBackend,
  bundlePath: string,
  id: string,
  limits: DestinationLimits,
  signal?: AbortSignal,
): Promise<{ path: string; sha256: string; size: number }[]> {
  const path = snapshotPath(bundlePath, id);
  const where = locatePath(backend.location, path);
  let bytes: Uint8Array;
  try {
    bytes = await backend.readFile(path, { signal, maxBytes: limits.stateBytes.value });
  } catch (error) {
    if (isStorageError(error, "not_found")) {
      throw new ReleaseRecordError(`${where} is missing: release ${id} was never committed`);
    }
    throw error;
  }
  let document: ReturnType<typeof parseDocument>;
  try {
    document = parseDocument(Buffer.from(bytes).toString("utf8"));
  } catch (error) {
    throw new ReleaseRecordError(`${where}: ${(error as Error).message}`);
  }
  if (isSharedRootState(document)) throw new ReleaseRecordError(`${where}: a shared-root state`);
  return document.outputs.map((output) => ({
    path: output.path,
    sha256: output.sha256,
    size: output.size,
  }));
}

/** The paths a check found changed, missing or added, for a message: at most five, then a count. */
export function describeDrift(check: ReleaseCheck): string {
  if (check.directoryMissing) return `${check.id}: its directory is missing`;
  const parts: string[] = [];
  const list = (label: string, paths: readonly string[]) => {
    if (paths.length === 0) return;
    const shown = paths.slice(0, 5).join(", ");
    parts.push(`${label} ${shown}${paths.length > 5 ? ` (and ${paths.length - 5} more)` : ""}`);
  };
  list("changed", check.changed);
  list("missing", check.missing);
  list("added", check.added);
  return `${check.id}: ${parts.join("; ")}`;
}
