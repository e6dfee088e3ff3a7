import {
  type DestinationStatus,
  encodeDocument,
  encodeDocumentSteps,
  parseDocumentSteps,
  type StateDocument,
  StateError,
} from "@distributor/state";
import {
  isStorageError,
  isTempFileName,
  LEASE_FILE_NAME,
  locatePath,
  relativeTo,
  STATE_FILE_NAME,
  type StorageBackend,
  type StorageEntry,
  statePath,
} from "@distributor/storage";
import { runInSlices } from "../run-in-slices.js";

/** State files larger than this are refused rather than read into memory, and never written. */
export const MAX_STATE_BYTES = 64 * 1024 * 1024;

/**
 * A next state too large to be read back (`MAX_STATE_BYTES`): written, it would fail every later
 * run at that destination until someone removed it, so it is refused before anything is touched.
 */
export class StateTooLargeError extends Error {
  override readonly name = "StateTooLargeError";
  readonly code = "state_too_large";
}

/**
 * The bytes of `document` as a state file: validated (an invalid state throws `StateError`) and
 * no larger than `MAX_STATE_BYTES`, so that what is written can always be read back. `path` names
 * the file in the message. Callers encode before their first write or delete.
 */
export function encodeStateFile(
  backend: StorageBackend,
  path: string,
  document: StateDocument,
): Uint8Array {
  return checkedStateSize(backend, path, encodeDocument(document));
}

/** `encodeStateFile` in slices, the event loop turning between them (a big state under a lease). */
export async function encodeStateFileInSlices(
  backend: StorageBackend,
  path: string,
  document: StateDocument,
): Promise<Uint8Array> {
  return checkedStateSize(backend, path, await runInSlices(encodeDocumentSteps(document)));
}

function checkedStateSize(backend: StorageBackend, path: string, bytes: Uint8Array): Uint8Array {
  if (bytes.length > MAX_STATE_BYTES) {
    throw new StateTooLargeError(
      `state file ${locatePath(backend.location, path)} would be ${bytes.length} bytes, more than the ${MAX_STATE_BYTES} a state file may have (it could not be read back); nothing was written`,
    );
  }
  return bytes;
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/** A parsed `.distributor.json` with the version token of the bytes it was parsed from. */
export interface StateFile {
  text: string;
  document: StateDocument;
  version: string;
}

/**
 * Reads and parses the state file at `path`, at most `MAX_STATE_BYTES` of it. Bytes that are not
 * UTF-8 (they cannot be state distributor wrote) or not valid state fail with a `StateError`
 * naming the file; storage failures (`not_found`, `limit_exceeded`, ...) propagate as they are.
 */
export async function readStateFile(
  backend: StorageBackend,
  path: string,
  signal?: AbortSignal,
): Promise<StateFile> {
  const { bytes, version } = await backend.readVersioned(path, {
    maxBytes: MAX_STATE_BYTES,
    signal,
  });
  return { ...(await parseStateBytes(backend, path, bytes)), version };
}

/**
 * Decodes and parses state bytes; a big state is parsed in slices, the event loop turning
 * between them, so a lease held meanwhile is renewed on time.
 */
async function parseStateBytes(
  backend: StorageBackend,
  path: string,
  bytes: Uint8Array,
): Promise<{ text: string; document: StateDocument }> {
  try {
    const text = strictUtf8.decode(bytes);
    return { text, document: await runInSlices(parseDocumentSteps(text)) };
  } catch (error) {
    const detail = error instanceof TypeError ? "not UTF-8 text" : (error as Error).message;
    throw new StateError(
      `state file ${locatePath(backend.location, path)} is not valid state: ${detail}`,
      { cause: error },
    );
  }
}

/** What planning knows about a bundle path's state: parsed, missing, or invalid (as data). */
export interface DestinationStateRead {
  status: DestinationStatus;
  /** Version of the state file read; undefined when there is none. */
  version?: string | undefined;
}

/** Reads a destination bundle path's state; an unreadable or invalid file becomes `stateError`. */
export async function readDestinationStatus(
  backend: StorageBackend,
  bundlePath: string,
  signal?: AbortSignal,
): Promise<DestinationStateRead> {
  const path = statePath(bundlePath);
  // A state file is content: what else lies there matters only without one (absent vs
  // unmanaged), so a bundle path with a state costs one read (docs/design/bundles.md: a skip reads the state).
  const hasContents = true;
  let read: { bytes: Uint8Array; version: string };
  try {
    read = await backend.readVersioned(path, { maxBytes: MAX_STATE_BYTES, signal });
  } catch (error) {
    if (isStorageError(error, "not_found")) {
      return {
        status: { hasContents: await hasContentsBesidesLease(backend, bundlePath, signal) },
      };
    }
    if (!isStorageError(error, "limit_exceeded")) throw error;
    // Too large to be state; its version still lets a forced replacement swap it.
    const { version } = await backend.stat(path, { signal });
    return { status: { hasContents, stateError: error }, version };
  }
  try {
    const { document } = await parseStateBytes(backend, path, read.bytes);
    return { status: { hasContents, state: document }, version: read.version };
  } catch (error) {
    return { status: { hasContents, stateError: error }, version: read.version };
  }
}

/**
 * Whether the bundle path holds anything but distributor's own transient files: the lease a
 * writing run takes before it plans again, or the temp file of a write killed half-way, must not
 * make an empty destination look unmanaged (the lease holder removes such temp files). Lists at
 * most a few entries.
 */
async function hasContentsBesidesLease(
  backend: StorageBackend,
  bundlePath: string,
  signal: AbortSignal | undefined,
): Promise<boolean> {
  if (!(await backend.hasAny(bundlePath, { signal }))) return false;
  let entries: StorageEntry[];
  try {
    entries = await backend.walk(bundlePath, { limit: 16, signal });
  } catch (error) {
    if (isStorageError(error, "limit_exceeded")) return true;
    throw error;
  }
  // A prefix that is itself a file lists nothing below it, and is content.
  if (entries.length === 0) return true;
  return entries.some((entry) => {
    const name = relativeTo(bundlePath, entry.path);
    return !(entry.kind === "file" && (name === LEASE_FILE_NAME || isTempFileName(name)));
  });
}

/** Whether a logical path names a state file (`.distributor.json` at any bundle path). */
export function isStateFile(path: string): boolean {
  return path === STATE_FILE_NAME || path.endsWith(`/${STATE_FILE_NAME}`);
}
