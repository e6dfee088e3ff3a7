import {
  closeSync,
  fstatSync,
  fsync as fsyncCallback,
  linkSync,
  openSync,
  renameSync,
  rmdirSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { type FileHandle, lstat, mkdir, open } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { ByteReader, WriteData, WriteOptions, WriteResult } from "../backend.js";
import { mapBounded } from "../concurrency.js";
import type { StorageError, StorageOperation } from "../errors.js";
import { throwIfAborted } from "../internal/abort.js";
import { sourceStreamFailed, versionMismatch } from "../internal/backend-error.js";
import { eventLoopTurns, releaseChunkBuffer, takeChunkBuffer } from "../internal/chunk-buffers.js";
import { isByteReader, writeSource } from "../internal/write-source.js";
import { LEASE_FILE_NAME, STATE_FILE_NAME, tempFileName } from "../names.js";
import { type LocalRoot, localError, localVersion, nativePath, symlinkRefused } from "./context.js";
import { hasCode, toStorageError } from "./errno.js";
import { inspectPath, type PathState } from "./inspect.js";
import { withSwapLock } from "./swap-lock.js";

/**
 * Streams `data` into a temp file beside the target, fsyncs it (unless the backend runs without
 * fsync and the target is not a commit file) and moves it into place: rename
 * when overwriting, hard link + unlink otherwise, because `link` fails with EEXIST atomically and so
 * can never clobber a file that appeared after our check. A compare-and-swap (`ifMatch`) checks
 * the target's version just before the rename; the check and the rename are not one atomic step,
 * which is why distributor makes them only while holding the state file's lease. On any failure
 * the temp file is removed, so no partial target is ever visible, and so are the directories the
 * backend's writes made that are empty once the last write below them ends.
 */
export async function writeAtomically(
  local: LocalRoot,
  path: string,
  data: WriteData,
  options: WriteOptions,
  operation: StorageOperation,
): Promise<WriteResult> {
  // Registered before anything waits, so no other write of this backend removes a directory
  // this one is about to use; see `leaveDirectories`.
  const directories = enterDirectories(local, path);
  try {
    const result = await writeInPlace(local, path, data, options, operation);
    // An output lies below each of them now: none is left for the last write to remove.
    for (const directory of directories) local.made.delete(directory);
    return result;
  } finally {
    leaveDirectories(local, directories);
  }
}

async function writeInPlace(
  local: LocalRoot,
  path: string,
  data: WriteData,
  options: WriteOptions,
  operation: StorageOperation,
): Promise<WriteResult> {
  const { signal, ifMatch } = options;
  const overwrite = ifMatch !== undefined || (options.overwrite ?? false);
  const state = await inspectPath(local, path, operation);
  if (ifMatch !== undefined) checkVersion(state, ifMatch, operation, path);
  switch (state.kind) {
    case "blocked":
      throw localError("conflict", operation, path, `"${state.at}" is a file, not a directory`);
    case "directory":
      throw localError("unsupported", operation, path, "is a directory");
    case "other":
      throw localError("unsupported", operation, path, "is not a regular file");
    case "file":
      if (!overwrite) throw localError("already_exists", operation, path);
      break;
    case "missing":
      break;
  }

  const segments = path.split("/");
  const target = nativePath(local, path);
  const existing = state.kind === "missing" ? state.existing : segments.length - 1;
  throwIfAborted(signal);
  const created = await createParents(local, path, segments, existing, operation);
  const name = segments[segments.length - 1] ?? "";
  const directory = dirname(target);
  const commit = isCommitFile(name);
  const temp = join(directory, tempFileName(name));
  let committed = false;
  // Only a temp file this call created is ever removed: an EEXIST means the name is another's.
  let tempCreated = false;
  try {
    // Opens, writes, links and unlinks are synchronous (see `copyInto`); flushes are not.
    const fd = openSync(temp, "wx", 0o666);
    tempCreated = true;
    let version: string;
    try {
      await copyInto(fd, data, local.fsync || commit, signal, operation, path);
      version = localVersion(fstatSync(fd));
    } finally {
      closeSync(fd);
    }
    throwIfAborted(signal);
    // Everything the commit file will describe must be durable before it is.
    if (commit) {
      const own = created.map((made) => dirname(made));
      await flushDirectories(local, local.fsync ? [...local.unflushed, ...own] : own);
    }
    if (ifMatch !== undefined) {
      // Check and rename under a lock on the target, so that of two compare-and-swaps of one
      // version exactly one succeeds; readers still see one rename, old bytes or new.
      await withSwapLock(dirname(target), segments[segments.length - 1] ?? "", async () => {
        checkVersion(await inspectPath(local, path, operation), ifMatch, operation, path);
        renameSync(temp, target);
      });
    } else if (overwrite) {
      renameSync(temp, target);
    } else {
      linkSync(temp, target);
    }
    committed = true;
    if (commit) {
      await syncDirectory(directory);
    } else if (local.fsync) {
      // Without fsync nothing waits for these: a commit flushes only its own directories.
      local.unflushed.add(directory);
      for (const made of created) local.unflushed.add(dirname(made));
    }
    return { version };
  } catch (error) {
    throw writeError(error, operation, path, overwrite);
  } finally {
    if (tempCreated && (!committed || !overwrite)) unlinkQuietly(temp);
  }
}

/** Counts a write in on every directory above `path` below the root; returns their native paths. */
function enterDirectories(local: LocalRoot, path: string): string[] {
  const directories: string[] = [];
  for (let end = path.indexOf("/"); end !== -1; end = path.indexOf("/", end + 1)) {
    const directory = nativePath(local, path.slice(0, end));
    local.writing.set(directory, (local.writing.get(directory) ?? 0) + 1);
    directories.push(directory);
  }
  return directories;
}

/**
 * Counts a write out again, deepest directory first. When the last write below a directory that
 * one of them made ends, the directory is removed if it is empty: a write that fails after
 * making it (an abort, a source that changed) cannot remove it while another write's temp file
 * is still inside, and when every write in it failed no output is left for the publish's
 * cleanup to prune it with. Counting and removing happen in one synchronous step, so no write of
 * this backend is between making sure of a directory and creating its temp file there; `rmdir`
 * removes only empty directories, so nothing another process put there is touched.
 */
function leaveDirectories(local: LocalRoot, directories: readonly string[]): void {
  for (let index = directories.length - 1; index >= 0; index--) {
    const directory = directories[index]!;
    const left = (local.writing.get(directory) ?? 1) - 1;
    if (left > 0) {
      local.writing.set(directory, left);
      continue;
    }
    local.writing.delete(directory);
    if (!local.made.delete(directory)) continue;
    try {
      rmdirSync(directory);
    } catch {
      // Not empty (something else was put there), or gone already: nothing to remove.
    }
  }
}

/**
 * Streams the payload into the temp file and (with `fsync`) flushes it. A failure of our own file
 * (ENOSPC, EIO) is the backend's; anything else came from the caller's source, whose errors can
 * look just like ours (a source file's ENOENT) but say nothing about the target.
 *
 * Chunks are written with synchronous `write(2)`s: into the page cache that is a copy of at most
 * one chunk (256 KiB from a local source), far cheaper than a thread-pool round trip per call, which for small files
 * cost more than the bytes. The flush, which waits on the disk, stays on the thread pool so that
 * many files' flushes overlap. The copy is a plain loop rather than `stream.pipeline`, which
 * costs an AbortController (and a DOMException with a stack trace) per file.
 */
async function copyInto(
  fd: number,
  data: WriteData,
  fsync: boolean,
  signal: AbortSignal | undefined,
  operation: StorageOperation,
  path: string,
): Promise<void> {
  if (isByteReader(data)) {
    await copyFromReader(fd, data, signal, operation, path);
  } else {
    await copyFromSource(fd, data, signal, operation, path);
  }
  if (fsync) await flushFile(fd);
}

/**
 * A reader fills one reused buffer, each chunk written out before the next read: no buffer per
 * chunk. Every 8 MiB the loop lets the event loop turn. The reader is closed by the
 * write's frame.
 */
async function copyFromReader(
  fd: number,
  reader: ByteReader,
  signal: AbortSignal | undefined,
  operation: StorageOperation,
  path: string,
): Promise<void> {
  const buffer = takeChunkBuffer();
  try {
    const turn = eventLoopTurns();
    for (;;) {
      throwIfAborted(signal);
      let length: number;
      try {
        length = await reader.read(buffer);
      } catch (error) {
        throwIfAborted(signal);
        throw sourceStreamFailed(error, localError, operation, path);
      }
      if (length === 0) return;
      writeFully(fd, buffer.subarray(0, length));
      const pending = turn(length);
      if (pending !== undefined) await pending;
    }
  } finally {
    releaseChunkBuffer(buffer);
  }
}

async function copyFromSource(
  fd: number,
  data: WriteData,
  signal: AbortSignal | undefined,
  operation: StorageOperation,
  path: string,
): Promise<void> {
  const source = writeSource(data);
  const onAbort = () => destroySource(source, signal?.reason);
  signal?.addEventListener("abort", onAbort, { once: true });
  try {
    throwIfAborted(signal);
    let iterator: Iterator<Uint8Array> | AsyncIterator<Uint8Array>;
    try {
      iterator =
        Symbol.asyncIterator in source
          ? (source as AsyncIterable<Uint8Array>)[Symbol.asyncIterator]()
          : (source as Iterable<Uint8Array>)[Symbol.iterator]();
    } catch (error) {
      throw sourceStreamFailed(error, localError, operation, path);
    }
    for (;;) {
      let next: IteratorResult<Uint8Array>;
      try {
        next = await iterator.next();
      } catch (error) {
        throwIfAborted(signal);
        throw sourceStreamFailed(error, localError, operation, path);
      }
      if (next.done) break;
      throwIfAborted(signal);
      writeFully(fd, next.value);
    }
  } catch (error) {
    destroySource(source, error);
    throw error;
  } finally {
    signal?.removeEventListener("abort", onAbort);
  }
}

function destroySource(source: unknown, error: unknown): void {
  const destroy = (source as { destroy?: unknown }).destroy;
  if (typeof destroy === "function") destroy.call(source, error);
}

function writeFully(fd: number, chunk: Uint8Array): void {
  let offset = 0;
  while (offset < chunk.length) {
    offset += writeSync(fd, chunk, offset, chunk.length - offset);
  }
}

function flushFile(fd: number): Promise<void> {
  return new Promise((resolve, reject) => {
    fsyncCallback(fd, (error) => (error ? reject(error) : resolve()));
  });
}

function unlinkQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // Already gone, or the directory went with it: nothing left to remove.
  }
}

/** The files whose write commits a publication or a lease: always flushed with their directory. */
function isCommitFile(name: string): boolean {
  return name === STATE_FILE_NAME || name === LEASE_FILE_NAME;
}

/** Directory fsyncs in flight at once; each waits on the disk, not on this process. */
const FLUSH_CONCURRENCY = 16;

/**
 * Flushes the given directories' entries. Each is forgotten as its flush starts (a name moved in
 * meanwhile marks it again) and remembered again if the flush fails, for the next commit to
 * retry; a directory removed meanwhile has nothing left to flush.
 */
async function flushDirectories(local: LocalRoot, directories: readonly string[]): Promise<void> {
  await mapBounded([...new Set(directories)], FLUSH_CONCURRENCY, async (directory) => {
    // Forgotten before the flush, not after: a name renamed in while it runs marks it again.
    local.unflushed.delete(directory);
    try {
      await syncDirectory(directory);
    } catch (error) {
      local.unflushed.add(directory);
      throw error;
    }
  });
}

async function syncDirectory(directory: string): Promise<void> {
  let handle: FileHandle;
  try {
    handle = await open(directory, "r");
  } catch (error) {
    if (hasCode(error, "ENOENT")) return;
    throw error;
  }
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

export function checkVersion(
  state: PathState,
  expected: string,
  operation: StorageOperation,
  path: string,
): void {
  const current = state.kind === "file" ? localVersion(state.stats) : undefined;
  if (current !== expected) {
    throw localError("conflict", operation, path, versionMismatch(expected, current));
  }
}

/** Creates the missing parents one level at a time so each new level is checked, not followed. */
async function createParents(
  local: LocalRoot,
  path: string,
  segments: string[],
  existing: number,
  operation: StorageOperation,
): Promise<string[]> {
  const created: string[] = [];
  try {
    // The root is created on first write; everything below it one level at a time.
    if (existing === 0) await mkdir(local.root, { recursive: true });
    for (let index = existing; index < segments.length - 1; index++) {
      const partial = segments.slice(0, index + 1).join("/");
      const native = nativePath(local, partial);
      try {
        await mkdir(native);
        created.push(native);
        local.made.add(native);
      } catch (error) {
        if (!hasCode(error, "EEXIST")) throw error;
        // Someone else created it meanwhile: accept only a real directory.
        const stats = await lstat(native);
        if (stats.isSymbolicLink()) throw symlinkRefused(operation, path, partial);
        if (!stats.isDirectory()) {
          throw localError("conflict", operation, path, `"${partial}" is a file, not a directory`);
        }
      }
    }
    return created;
  } catch (error) {
    // What was made is removed when this write is counted out (`leaveDirectories`).
    if (hasCode(error, "ENOTDIR")) {
      throw localError("conflict", operation, path, "a parent is not a directory", error);
    }
    throw toStorageError(error, operation, path);
  }
}

function writeError(
  error: unknown,
  operation: StorageOperation,
  path: string,
  overwrite: boolean,
): StorageError {
  if (!overwrite && hasCode(error, "EPERM", "ENOTSUP", "EOPNOTSUPP") && isLinkError(error)) {
    return localError(
      "unsupported",
      operation,
      path,
      "the filesystem does not support hard links, which no-clobber writes need",
      error,
    );
  }
  return toStorageError(error, operation, path);
}

function isLinkError(error: unknown): boolean {
  return (error as { syscall?: unknown }).syscall === "link";
}
