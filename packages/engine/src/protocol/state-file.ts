import { isUtf8 } from "node:buffer";
import {
  isUtf8Steps,
  type Manifest,
  runWithStreamedPieces,
  StreamedUtf8Pieces,
  utf8Pieces,
  WholeTextNeeded,
} from "@distributor/bundle";
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
  runInSlices,
  STATE_FILE_NAME,
  type Steps,
  type StorageBackend,
  type StorageEntry,
  StorageError,
  statePath,
  type VersionedReader,
} from "@distributor/storage";
import {
  DEFAULT_DESTINATION_LIMITS,
  type DestinationLimit,
  MAX_READABLE_STATE_BYTES,
  MAX_STATE_BYTES,
  stateLimitText,
} from "./limits.js";

export { MAX_STATE_BYTES };

/** The bound on state bytes of a caller that passes none: `MAX_STATE_BYTES`. */
const DEFAULT_STATE_LIMIT = DEFAULT_DESTINATION_LIMITS.stateBytes;

/**
 * A next state larger than the destination's bound (`DestinationLimits.stateBytes`, 64 MiB unless
 * set): written, it could not be read back and would fail every later run at that destination
 * until someone removed it, so it is refused before anything is touched.
 */
export class StateTooLargeError extends Error {
  override readonly name = "StateTooLargeError";
  readonly code = "state_too_large";
}

/**
 * The bytes of `document` as a state file: validated (an invalid state throws `StateError`) and
 * no larger than `limit`, so that what is written can always be read back under that bound.
 * `path` names the file in the message. Callers encode before their first write or delete.
 */
export function encodeStateFile(
  backend: StorageBackend,
  path: string,
  document: StateDocument,
  limit: DestinationLimit = DEFAULT_STATE_LIMIT,
): Uint8Array {
  return checkedStateSize(backend, path, encodeDocument(document), limit);
}

/** `encodeStateFile` in slices, the event loop turning between them (a big state under a lease). */
export async function encodeStateFileInSlices(
  backend: StorageBackend,
  path: string,
  document: StateDocument,
  limit: DestinationLimit = DEFAULT_STATE_LIMIT,
): Promise<Uint8Array> {
  return checkedStateSize(backend, path, await runInSlices(encodeDocumentSteps(document)), limit);
}

function checkedStateSize(
  backend: StorageBackend,
  path: string,
  bytes: Uint8Array,
  limit: DestinationLimit,
): Uint8Array {
  const where = locatePath(backend.location, path);
  if (bytes.length > MAX_READABLE_STATE_BYTES && limit.value >= MAX_READABLE_STATE_BYTES) {
    // Whatever the bound says, a text this long cannot be decoded again.
    throw new StateTooLargeError(
      `state file ${where} would be ${bytes.length} bytes, more than the ${MAX_READABLE_STATE_BYTES} a state file can have and still be read back; nothing was written`,
    );
  }
  if (bytes.length > limit.value) {
    throw new StateTooLargeError(
      limit.setting === undefined
        ? `state file ${where} would be ${bytes.length} bytes, more than ${stateLimitText(limit)} (it could not be read back); nothing was written`
        : `state file ${where} would be ${bytes.length} bytes, more than ${stateLimitText(limit)}; raise it to publish this many outputs; nothing was written`,
    );
  }
  return bytes;
}

/**
 * Reads the bytes of the state file at `path`, at most `limit` of them: a larger file fails
 * `limit_exceeded` saying that the state is larger than the bound (and the setting that raises it).
 */
async function readStateBytes(
  backend: StorageBackend,
  path: string,
  signal: AbortSignal | undefined,
  limit: DestinationLimit,
): Promise<{ bytes?: Uint8Array | undefined; version: string }> {
  try {
    // A fresh object: the parse drops its bytes once decoded.
    const { bytes, version } = await backend.readVersioned(path, { maxBytes: limit.value, signal });
    return { bytes, version };
  } catch (error) {
    if (!isStorageError(error, "limit_exceeded")) throw error;
    const raise = limit.setting === undefined ? "" : "; raise it to read this state";
    throw new StorageError({
      kind: "limit_exceeded",
      operation: error.operation,
      backend: error.backend,
      path: error.path,
      detail: `state file is larger than ${stateLimitText(limit)}${raise}`,
      cause: error,
    });
  }
}

/** Bytes of a state decoded between two pauses: a 373 MB state took 1.7 s in one strict decode. */
const DECODE_CHUNK_BYTES = 4 * 1024 * 1024;

const UTF8_BOM = [0xef, 0xbb, 0xbf] as const;

/**
 * The bytes as UTF-8 text; bytes that are not UTF-8 throw a `TypeError`, as a strict
 * `TextDecoder` does (which also drops a leading byte order mark, as this does). A chunk per step,
 * each ending before a character's first byte, is checked (`isUtf8`, native) and decoded; the
 * bytes are let go (`read.bytes`) before the chunks are joined, so a big state is held twice at
 * most while it is decoded (bytes and chunks, then chunks and text), not three times. The longest
 * step is the join: 0.27 s for 373 MB on the 2-core machine, against 0.86 s for one decode.
 */
function* strictUtf8Steps(read: { bytes?: Uint8Array | undefined }): Steps<string> {
  let view: Buffer | undefined = bufferOf(read.bytes ?? new Uint8Array());
  const bom = UTF8_BOM.every((byte, index) => view?.[index] === byte);
  const parts: string[] = [];
  for (let start = bom ? UTF8_BOM.length : 0; start < view.length; ) {
    let end = Math.min(view.length, start + DECODE_CHUNK_BYTES);
    // Never cut a character: a chunk ends before a byte that starts one (at most 3 back).
    while (end < view.length && end > start && ((view[end] ?? 0) & 0xc0) === 0x80) end--;
    const chunk = view.subarray(start, end);
    if (end === start || !isUtf8(chunk)) {
      throw new TypeError("The encoded data was not valid for encoding utf-8");
    }
    parts.push(chunk.toString("utf8"));
    start = end;
    yield;
  }
  view = undefined;
  read.bytes = undefined;
  return parts.length === 1 ? (parts[0] as string) : parts.join("");
}

function bufferOf(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** A parsed `.distributor.json` with the version token of the bytes it was parsed from. */
export interface StateFile {
  text: string;
  document: StateDocument;
  version: string;
}

/**
 * Reads and parses the state file at `path`, at most `limit` of it (default `MAX_STATE_BYTES`).
 * Bytes that are not UTF-8 (they cannot be state distributor wrote) or not valid state fail with
 * a `StateError` naming the file; storage failures (`not_found`, ...) propagate as they are, a
 * file over the bound as `limit_exceeded` naming it.
 */
export async function readStateFile(
  backend: StorageBackend,
  path: string,
  signal?: AbortSignal,
  limit: DestinationLimit = DEFAULT_STATE_LIMIT,
): Promise<StateFile> {
  const read = await readStateBytes(backend, path, signal, limit);
  const { text, document } = await parseStateBytes(backend, path, read, { keepText: true });
  return { text: text ?? "", document, version: read.version };
}

/**
 * Decodes and parses state bytes; a big state is parsed in slices, the event loop turning
 * between them, so a lease held meanwhile is renewed on time. Without `keepText` the text is
 * never made whole: it is decoded a piece at a time as the parse reads it, so a big state is held
 * once (its bytes), not twice (bytes and text).
 */
async function parseStateBytes(
  backend: StorageBackend,
  path: string,
  read: { bytes?: Uint8Array | undefined },
  options: { sharedManifest?: Manifest | undefined; keepText?: boolean } = {},
): Promise<{ text?: string; document: StateDocument }> {
  try {
    if (options.keepText) {
      // The bytes are let go once decoded: a big state is not held twice while it is parsed.
      const text = await runInSlices(strictUtf8Steps(read));
      const document = await runInSlices(parseDocumentSteps(text));
      return { text, document };
    }
    const bytes = read.bytes ?? new Uint8Array();
    read.bytes = undefined;
    if (!(await runInSlices(isUtf8Steps(bytes)))) {
      throw new TypeError("The encoded data was not valid for encoding utf-8");
    }
    // A leading byte order mark is dropped, as a strict `TextDecoder` drops it.
    const text = utf8Pieces(bytes, { dropBom: true });
    const { sharedManifest } = options;
    return { document: await runInSlices(parseDocumentSteps(text, { sharedManifest })) };
  } catch (error) {
    const detail = error instanceof TypeError ? "not UTF-8 text" : (error as Error).message;
    throw new StateError(
      `state file ${locatePath(backend.location, path)} is not valid state: ${detail}`,
      { cause: error },
    );
  }
}

/**
 * The state parsed as it is read, a chunk at a time, when the backend reads so
 * (`openVersionedReader`): a million-output state (373 MB) is never held whole, as bytes or as
 * text. Undefined when the backend cannot, or the file cannot be read or is not valid state: the
 * caller then reads it whole, for the verdict and message it has always given.
 */
async function readStreamedState(
  backend: StorageBackend,
  path: string,
  signal: AbortSignal | undefined,
  limit: DestinationLimit,
  sharedManifest: Manifest | undefined,
): Promise<{ document: StateDocument; version: string } | undefined> {
  if (backend.openVersionedReader === undefined) return undefined;
  let opened: VersionedReader;
  try {
    opened = await backend.openVersionedReader(path, { maxBytes: limit.value, signal });
  } catch {
    // Read again whole, which fails as it always has (an aborted signal included).
    return undefined;
  }
  try {
    const pieces = new StreamedUtf8Pieces(opened.reader);
    const whole = () => {
      throw new WholeTextNeeded();
    };
    const steps = parseDocumentSteps({ pieces, whole }, { sharedManifest });
    return { document: await runWithStreamedPieces(steps, pieces), version: opened.version };
  } catch {
    return undefined;
  } finally {
    opened.reader.close();
  }
}

/** What planning knows about a bundle path's state: parsed, missing, or invalid (as data). */
export interface DestinationStateRead {
  status: DestinationStatus;
  /** Version of the state file read; undefined when there is none. */
  version?: string | undefined;
}

/**
 * Reads a destination bundle path's state, at most `limit` of it; an unreadable, invalid or too
 * large file becomes `stateError`. `sharedManifest` (the run's source manifest) lends the state's
 * embedded manifest its equal strings (`ParseOptions`).
 */
export async function readDestinationStatus(
  backend: StorageBackend,
  bundlePath: string,
  signal?: AbortSignal,
  limit: DestinationLimit = DEFAULT_STATE_LIMIT,
  sharedManifest?: Manifest,
): Promise<DestinationStateRead> {
  const path = statePath(bundlePath);
  // A state file is content: what else lies there matters only without one (absent vs
  // unmanaged), so a bundle path with a state costs one read (docs/design/bundles.md: a skip reads the state).
  const hasContents = true;
  const streamed = await readStreamedState(backend, path, signal, limit, sharedManifest);
  if (streamed !== undefined) {
    return { status: { hasContents, state: streamed.document }, version: streamed.version };
  }
  let read: { bytes?: Uint8Array | undefined; version: string };
  try {
    read = await readStateBytes(backend, path, signal, limit);
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
    const { document } = await parseStateBytes(backend, path, read, { sharedManifest });
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
