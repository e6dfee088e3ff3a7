import { Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import {
  type ByteReader,
  LEASE_FILE_NAME,
  STATE_FILE_NAME,
  type StorageOperation,
  type WriteData,
  type WriteOptions,
  type WriteResult,
} from "@distributor/storage";
import {
  CHUNK_BYTES,
  isByteReader,
  releaseChunkBuffer,
  sourceStreamFailed,
  takeChunkBuffer,
  tempFileName,
  throwIfAborted,
  versionMismatch,
  writeSource,
} from "@distributor/storage/adapter";
import type { Attributes } from "ssh2";
import { hasStatus, STATUS, sshError } from "./errors.js";
import { kindOf, type PathState, type Remote, remoteVersion, symlinkRefused } from "./remote.js";
import { SFTP_EXTENSIONS } from "./session.js";
import { withSwapLock } from "./swap-lock.js";

/** WRITE requests one file keeps outstanding, so a transfer is not one round trip per chunk. */
const WRITES_IN_FLIGHT = 8;
const BLOCK_BYTES = CHUNK_BYTES;

/**
 * Streams `data` into a reserved temp name beside the target, flushes it (`fsync@openssh.com`
 * where offered) and moves it into place: `posix-rename@openssh.com` when overwriting (an atomic
 * replace), a hard link (`hardlink@openssh.com`, else the plain SFTP rename, which OpenSSH also
 * implements with link(2)) when not, because a link fails atomically when the name exists and so
 * can never clobber a file that appeared after our check. A compare-and-swap checks the target's
 * version and renames while holding the target's swap lock (an exclusively created file beside
 * it, named as the local backend names its own), so of two swaps of one version exactly one
 * wins. On failure the temp file is removed, and so are the directories the backend's writes
 * made that received no output once the last write below them ends.
 */
export async function writeAtomically(
  shared: Remote,
  path: string,
  data: WriteData,
  options: WriteOptions,
  operation: StorageOperation,
  fsync: boolean,
): Promise<WriteResult> {
  // The temp file's handle lives on one channel; the whole write stays there.
  const remote = shared.onLane();
  // Counted in before anything waits: see `Remote.leaveDirectories`.
  const directories = remote.enterDirectories(path);
  try {
    // A directory abandoned before this write counted in may still be on its way out.
    await remote.removals();
    const result = await writeInPlace(remote, path, data, options, operation, fsync);
    remote.keepDirectories(directories);
    return result;
  } finally {
    await remote.cleanUp(remote.leaveDirectories(directories));
  }
}

const ATOMIC_REPLACE_UNSUPPORTED = `the SFTP server does not offer ${SFTP_EXTENSIONS.posixRename[0]}, which atomic replacement needs`;

async function writeInPlace(
  remote: Remote,
  path: string,
  data: WriteData,
  options: WriteOptions,
  operation: StorageOperation,
  fsync: boolean,
): Promise<WriteResult> {
  const { signal, ifMatch } = options;
  const overwrite = ifMatch !== undefined || (options.overwrite ?? false);
  if (overwrite && !remote.session.supports("posixRename")) {
    throw sshError("unsupported", operation, path, ATOMIC_REPLACE_UNSUPPORTED);
  }
  const state = await remote.inspect(path, operation);
  if (ifMatch !== undefined) checkVersion(state, ifMatch, operation, path);
  switch (state.kind) {
    case "blocked":
      throw sshError("conflict", operation, path, `"${state.at}" is a file, not a directory`);
    case "directory":
      throw sshError("unsupported", operation, path, "is a directory");
    case "other":
      throw sshError("unsupported", operation, path, "is not a regular file");
    case "file":
      if (!overwrite) throw sshError("already_exists", operation, path);
      break;
    case "missing":
      break;
  }
  const segments = path.split("/");
  const existing = state.kind === "missing" ? state.existing : segments.length - 1;
  throwIfAborted(signal);
  await createParents(remote, path, segments, existing, operation);
  const parent = segments.slice(0, -1).join("/");
  const name = segments[segments.length - 1] as string;
  const temp = parent === "" ? tempFileName(name) : `${parent}/${tempFileName(name)}`;
  let tempExists = false;
  try {
    const handle = await openExclusive(remote, temp, path, parent, operation);
    tempExists = true;
    let attrs: Attributes;
    let closed = false;
    const close = () => {
      closed = true;
      return remote.call((sftp, done) => sftp.close(handle, done));
    };
    const closeQuietly = () => {
      closed = true;
      return remote.tidy((sftp, done) => sftp.close(handle, done));
    };
    try {
      await copyInto(remote, handle, data, signal, operation, path);
      // One channel answers in order, so these go out together: one round trip, not three.
      // Commit files are flushed even when the destination runs without fsync.
      const flush = fsync || name === STATE_FILE_NAME || name === LEASE_FILE_NAME;
      const flushed =
        flush && remote.session.supports("fsync")
          ? remote.call((sftp, done) => sftp.ext_openssh_fsync(handle, done))
          : Promise.resolve();
      const described = remote.call<Attributes>((sftp, done) => sftp.fstat(handle, done));
      // Awaited below; until then a failure of one must not surface as an unhandled rejection.
      flushed.catch(() => undefined);
      described.catch(() => undefined);
      if (overwrite) {
        await flushed;
        attrs = await described;
        throwIfAborted(signal);
        const replace = async () => {
          attrs = await prepareReplace(remote, handle, attrs, path, ifMatch, operation);
          await close();
          await remote.call((sftp, done) =>
            sftp.ext_openssh_rename(remote.path(temp), remote.path(path), done),
          );
          tempExists = false;
        };
        // Of two compare-and-swaps of one version exactly one may win: check and rename under
        // the target's swap lock, as the local backend does.
        if (ifMatch === undefined) await replace();
        else await withSwapLock(remote, parent, name, replace);
      } else {
        const closing = close();
        await Promise.all([flushed, closing]);
        attrs = await described;
        throwIfAborted(signal);
        tempExists = false;
        await linkNoClobber(remote, temp, path, operation);
      }
    } finally {
      if (!closed) await closeQuietly();
    }
    return { version: remoteVersion(attrs) };
  } finally {
    if (tempExists) await remote.tidy((sftp, done) => sftp.unlink(remote.path(temp), done));
  }
}

/** Opens the temp file with CREAT|EXCL; a directory removed since we verified it is recreated once. */
async function openExclusive(
  remote: Remote,
  temp: string,
  path: string,
  parent: string,
  operation: StorageOperation,
): Promise<Buffer> {
  const open = () => remote.call<Buffer>((sftp, done) => sftp.open(remote.path(temp), "wx", done));
  try {
    return await open();
  } catch (error) {
    // A concurrent run pruned the (empty) directory after we verified it: check again.
    if (!hasStatus(error, STATUS.NO_SUCH_FILE) || parent === "") throw error;
    remote.forget(parent);
    const segments = path.split("/");
    const state = await remote.inspect(parent, operation);
    if (state.kind === "directory") return open();
    const existing = state.kind === "missing" ? state.existing : 0;
    await createParents(remote, path, segments, existing, operation);
    return open();
  }
}

/**
 * Before a replace: re-checks `ifMatch` against the target as it is now, and makes the new
 * version token differ from the one it replaces. SFTP mtimes have whole seconds, so a file
 * replaced within the second by one of the same size would keep its token; giving the new file
 * an mtime past the old one keeps tokens unique per path.
 */
async function prepareReplace(
  remote: Remote,
  handle: Buffer,
  attrs: Attributes,
  path: string,
  ifMatch: string | undefined,
  operation: StorageOperation,
): Promise<Attributes> {
  const current = await remote.lstat(path);
  const currentFile = current !== undefined && kindOf(current) === "file" ? current : undefined;
  if (ifMatch !== undefined) {
    const found = currentFile === undefined ? undefined : remoteVersion(currentFile);
    if (found !== ifMatch) {
      throw sshError("conflict", operation, path, versionMismatch(ifMatch, found));
    }
  }
  if (current !== undefined && kindOf(current) === "symlink") {
    throw symlinkRefused(operation, path, path);
  }
  if (currentFile === undefined || attrs.mtime > currentFile.mtime) return attrs;
  const mtime = currentFile.mtime + 1;
  await remote.call((sftp, done) => sftp.futimes(handle, attrs.atime, mtime, done));
  return { ...attrs, mtime };
}

/**
 * Links the finished temp file to `path` without ever replacing what is there, and removes the
 * temp name whatever the outcome. With `hardlink@openssh.com` the temp name is unlinked right
 * behind the link; without it the plain SFTP rename moves it (OpenSSH links and unlinks, and the
 * protocol has rename fail when the target exists) and the unlink behind it removes what a
 * refused rename left. Both go out together on one channel, which the server answers in order:
 * one round trip, and the temp name is gone even when the link's answer is lost.
 */
async function linkNoClobber(
  remote: Remote,
  temp: string,
  path: string,
  operation: StorageOperation,
): Promise<void> {
  const from = remote.path(temp);
  const to = remote.path(path);
  const linked = remote.session.supports("hardlink")
    ? remote.call((sftp, done) => sftp.ext_openssh_hardlink(from, to, done))
    : remote.call((sftp, done) => sftp.rename(from, to, done));
  // After a rename that worked the name is gone already: the unlink fails, which is fine.
  const removed = remote.tidy((sftp, done) => sftp.unlink(from, done));
  try {
    await linked;
  } catch (error) {
    await removed;
    // OpenSSH reports EEXIST as a generic failure: look before naming it.
    if ((await remote.lstat(path).catch(() => undefined)) !== undefined) {
      throw sshError("already_exists", operation, path, undefined, error);
    }
    throw error;
  } finally {
    await removed;
  }
}

function checkVersion(
  state: PathState,
  expected: string,
  operation: StorageOperation,
  path: string,
): void {
  const current = state.kind === "file" ? remoteVersion(state.attrs) : undefined;
  if (current !== expected) {
    throw sshError("conflict", operation, path, versionMismatch(expected, current));
  }
}

/**
 * Pipes the payload into the open handle with several WRITE requests outstanding. A failure of
 * the remote side is the backend's; anything else came from the caller's source.
 */
async function copyInto(
  remote: Remote,
  handle: Buffer,
  data: WriteData,
  signal: AbortSignal | undefined,
  operation: StorageOperation,
  path: string,
): Promise<void> {
  if (isByteReader(data)) return copyFromReader(remote, handle, data, signal, operation, path);
  return copyFromSource(remote, handle, data, signal, operation, path);
}

/**
 * A reader fills whole blocks straight from the source, each sent as one WRITE; a block goes
 * back to the shared pool when its WRITE is answered (not before: the request may still hold
 * it), so a file costs no buffer of its own beyond the requests in flight.
 */
async function copyFromReader(
  remote: Remote,
  handle: Buffer,
  reader: ByteReader,
  signal: AbortSignal | undefined,
  operation: StorageOperation,
  path: string,
): Promise<void> {
  const blockBytes = blockSizeOf(remote);
  let position = 0;
  let inFlight = 0;
  let failure: { error: unknown } | undefined;
  let wake: (() => void) | undefined;
  const settle = () => {
    const resume = wake;
    wake = undefined;
    resume?.();
  };
  const fail = (error: unknown) => {
    failure ??= { error };
    settle();
  };
  const unsubscribe = remote.session.onLost(fail);
  const waitFor = async (done: () => boolean) => {
    while (!done()) {
      await new Promise<void>((resolve) => {
        wake = resolve;
      });
    }
  };
  try {
    for (let ended = false; !ended; ) {
      await waitFor(() => inFlight < WRITES_IN_FLIGHT || failure !== undefined);
      if (failure !== undefined) break;
      throwIfAborted(signal);
      const buffer = takeChunkBuffer();
      const block = buffer.subarray(0, blockBytes);
      let filled = 0;
      try {
        while (filled < block.length) {
          const length = await reader.read(block.subarray(filled));
          if (length === 0) {
            ended = true;
            break;
          }
          filled += length;
        }
      } catch (error) {
        releaseChunkBuffer(buffer);
        throwIfAborted(signal);
        throw sourceStreamFailed(error, sshError, operation, path);
      }
      if (filled === 0 || failure !== undefined) {
        releaseChunkBuffer(buffer);
        continue;
      }
      const offset = position;
      position += filled;
      inFlight++;
      remote
        .call((sftp, done) => sftp.write(handle, block, 0, filled, offset, done))
        .then(
          () => releaseChunkBuffer(buffer),
          (error: unknown) => fail(error),
        )
        .finally(() => {
          inFlight--;
          settle();
        });
    }
    // A lost session never answers its requests: the failure ends the wait.
    await waitFor(() => inFlight === 0 || failure !== undefined);
    if (failure !== undefined) throw failure.error;
  } finally {
    unsubscribe();
  }
}

async function copyFromSource(
  remote: Remote,
  handle: Buffer,
  data: WriteData,
  signal: AbortSignal | undefined,
  operation: StorageOperation,
  path: string,
): Promise<void> {
  let sinkFailure: { error: unknown } | undefined;
  const sink = remoteSink(remote, handle, (error) => {
    sinkFailure ??= { error };
  });
  // A dropped connection fails the write even while it waits for its source.
  const unsubscribe = remote.session.onLost((error) => {
    sinkFailure ??= { error };
    sink.destroy(error);
  });
  try {
    await pipeline(writeSource(data), sink, { signal });
  } catch (error) {
    if (sinkFailure !== undefined) throw sinkFailure.error;
    throw sourceStreamFailed(error, sshError, operation, path);
  } finally {
    unsubscribe();
  }
}

/** Bytes per WRITE request: what the server accepts, at most one chunk buffer. */
function blockSizeOf(remote: Remote): number {
  return Math.max(1024, Math.min(BLOCK_BYTES, remote.session.maxWriteLength));
}

function remoteSink(remote: Remote, handle: Buffer, onFailure: (error: unknown) => void) {
  const blockBytes = blockSizeOf(remote);
  let position = 0;
  let inFlight = 0;
  let failure: unknown;
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let wake: (() => void) | undefined;

  const send = (block: Buffer) => {
    const offset = position;
    position += block.length;
    inFlight++;
    remote
      .call((sftp, done) => sftp.write(handle, block, 0, block.length, offset, done))
      .catch((error: unknown) => {
        failure ??= error;
        onFailure(error);
      })
      .finally(() => {
        inFlight--;
        const resume = wake;
        wake = undefined;
        resume?.();
      });
  };
  const room = async () => {
    while (inFlight >= WRITES_IN_FLIGHT && failure === undefined) {
      await new Promise<void>((resolve) => {
        wake = resolve;
      });
    }
  };
  const flushBlocks = async (all: boolean) => {
    while (failure === undefined && (pendingBytes >= blockBytes || (all && pendingBytes > 0))) {
      // A block may wait for a request slot, so it must not share memory the caller may reuse:
      // concat copies already; a block cut from one caller chunk is copied once.
      const single = pending.length === 1;
      const joined = single ? (pending[0] as Buffer) : Buffer.concat(pending);
      const cut = joined.subarray(0, Math.min(blockBytes, joined.length));
      const block = single ? Buffer.from(cut) : cut;
      const rest = joined.subarray(cut.length);
      pending = rest.length > 0 ? [rest] : [];
      pendingBytes = rest.length;
      await room();
      if (failure === undefined) send(block);
    }
  };
  return new Writable({
    write(chunk: Buffer, _encoding, callback) {
      pending.push(chunk);
      pendingBytes += chunk.length;
      flushBlocks(false).then(
        () => callback(failure as Error | undefined),
        (error: Error) => callback(error),
      );
    },
    final(callback) {
      (async () => {
        await flushBlocks(true);
        while (inFlight > 0) {
          await new Promise<void>((resolve) => {
            wake = resolve;
          });
        }
      })().then(
        () => callback(failure as Error | undefined),
        (error: Error) => callback(error),
      );
    },
  });
}

/**
 * Creates the missing parents one level at a time so each new level is checked, not followed;
 * what it makes is recorded (`Remote.markMade`) for the write to remove if nothing lands there.
 */
async function createParents(
  remote: Remote,
  path: string,
  segments: string[],
  existing: number,
  operation: StorageOperation,
): Promise<void> {
  // The root is created on first write (with its own missing parents); levels below one by one.
  if (existing === 0) await createRoot(remote);
  for (let index = existing; index < segments.length - 1; index++) {
    const partial = segments.slice(0, index + 1).join("/");
    try {
      await remote.call((sftp, done) => sftp.mkdir(remote.path(partial), done));
      remote.markMade(partial);
    } catch (error) {
      // Someone else created it meanwhile (OpenSSH says FAILURE for EEXIST): accept only a
      // real directory.
      const attrs = await remote.lstat(partial);
      if (attrs === undefined) throw error;
      const kind = kindOf(attrs);
      if (kind === "symlink") throw symlinkRefused(operation, path, partial);
      if (kind !== "directory") {
        throw sshError("conflict", operation, path, `"${partial}" is a file, not a directory`);
      }
    }
    remote.markVerified(partial);
  }
}

async function createRoot(remote: Remote): Promise<void> {
  if (remote.rootReady) return;
  const root = remote.root;
  const absolute = root.startsWith("/");
  const parts = root.split("/").filter((part) => part !== "" && part !== ".");
  for (let index = 1; index <= parts.length; index++) {
    const partial = `${absolute ? "/" : ""}${parts.slice(0, index).join("/")}`;
    try {
      await remote.call((sftp, done) => sftp.mkdir(partial, done));
    } catch (error) {
      const attrs = await remote
        .call<Attributes>((sftp, done) => sftp.stat(partial, done))
        .catch(() => undefined);
      if (attrs === undefined || kindOf(attrs) !== "directory") throw error;
    }
  }
  remote.rootReady = true;
}
