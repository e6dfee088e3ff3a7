import { Readable } from "node:stream";
import type { StorageOperation, VersionedFile } from "@distributor/storage";
import { throwIfAborted } from "@distributor/storage/adapter";
import type { Attributes } from "ssh2";
import { hasStatus, STATUS, sshError } from "./errors.js";
import { kindOf, type Remote, remoteVersion } from "./remote.js";

/** READ requests one stream keeps outstanding. */
const READS_IN_FLIGHT = 8;

/**
 * Opens a regular file below the root for reading. Symlinks are refused by the lstat walk; SFTP
 * has no O_NOFOLLOW, so the handle's own fstat confirms a regular file after the open.
 */
async function openFile(
  remote: Remote,
  path: string,
  operation: StorageOperation,
): Promise<{ handle: Buffer; attrs: Attributes }> {
  const state = await remote.inspect(path, operation);
  if (state.kind === "missing" || state.kind === "blocked") {
    throw sshError("not_found", operation, path);
  }
  if (state.kind === "directory") throw sshError("unsupported", operation, path, "is a directory");
  if (state.kind === "other") {
    throw sshError("unsupported", operation, path, "is not a regular file");
  }
  let handle: Buffer;
  try {
    handle = await remote.call<Buffer>((sftp, done) => sftp.open(remote.path(path), "r", done));
  } catch (error) {
    if (hasStatus(error, STATUS.NO_SUCH_FILE)) throw sshError("not_found", operation, path);
    throw error;
  }
  try {
    const attrs = await remote.call<Attributes>((sftp, done) => sftp.fstat(handle, done));
    if (kindOf(attrs) !== "file") {
      throw sshError("unsupported", operation, path, "is not a regular file");
    }
    return { handle, attrs };
  } catch (error) {
    await closeQuietly(remote, handle);
    throw error;
  }
}

function closeQuietly(remote: Remote, handle: Buffer): Promise<void> {
  return remote.tidy((sftp, done) => sftp.close(handle, done));
}

/** Reads up to `length` bytes at `position`; an empty buffer at the end of the file. */
async function readAt(
  remote: Remote,
  handle: Buffer,
  position: number,
  length: number,
): Promise<Buffer> {
  const buffer = Buffer.allocUnsafe(length);
  try {
    const bytes = await remote.call<number>((sftp, done) =>
      sftp.read(handle, buffer, 0, length, position, (error, bytesRead) => done(error, bytesRead)),
    );
    return buffer.subarray(0, bytes);
  } catch (error) {
    if (hasStatus(error, STATUS.EOF)) return Buffer.alloc(0);
    throw error;
  }
}

/**
 * Reads a whole file with the version of its handle's fstat, failing with `limit_exceeded` as
 * soon as it passes `maxBytes`. Atomic writers replace files by rename, so one handle reads the
 * bytes of one version.
 */
export async function readWholeFile(
  shared: Remote,
  path: string,
  maxBytes: number | undefined,
  signal: AbortSignal | undefined,
): Promise<VersionedFile> {
  const remote = shared.onLane();
  const operation = "read file";
  const limit = maxBytes ?? Number.POSITIVE_INFINITY;
  const { handle, attrs } = await openFile(remote, path, operation);
  try {
    if (attrs.size > limit) throw tooLarge(path, limit);
    const chunks: Buffer[] = [];
    let total = 0;
    const step = remote.session.maxReadLength;
    for (;;) {
      throwIfAborted(signal);
      // Several reads at once up to the size fstat gave, then one that must find the end.
      const remaining = Math.max(attrs.size - total, 0);
      const count = remaining === 0 ? 1 : Math.min(READS_IN_FLIGHT, Math.ceil(remaining / step));
      const parts = await Promise.all(
        Array.from({ length: count }, (_, index) =>
          readAt(remote, handle, total + index * step, step),
        ),
      );
      let ended = false;
      for (const part of parts) {
        if (part.length === 0) {
          ended = true;
          break;
        }
        chunks.push(part);
        total += part.length;
        if (total > limit) throw tooLarge(path, limit);
        // A short read leaves a gap before the next part's offset: read on from here.
        if (part.length < step) break;
      }
      if (ended) break;
    }
    return { bytes: Buffer.concat(chunks, total), version: remoteVersion(attrs) };
  } finally {
    await closeQuietly(remote, handle);
  }
}

function tooLarge(path: string, limit: number) {
  return sshError("limit_exceeded", "read file", path, `file is larger than ${limit} bytes`);
}

/**
 * A stream of the file's bytes with several READ requests outstanding, delivered in order. The
 * handle is closed when the stream ends or is destroyed; a signal destroys it with the reason.
 */
export async function openReadStream(
  shared: Remote,
  path: string,
  signal: AbortSignal | undefined,
): Promise<Readable> {
  const remote = shared.onLane();
  const { handle } = await openFile(remote, path, "open reader");
  if (signal?.aborted) {
    await closeQuietly(remote, handle);
    throwIfAborted(signal);
  }
  const step = remote.session.maxReadLength;
  let nextOffset = 0;
  let ended = false;
  const queue: { offset: number; bytes: Promise<Buffer> }[] = [];
  const fill = () => {
    while (!ended && queue.length < READS_IN_FLIGHT) {
      const offset = nextOffset;
      const bytes = readAt(remote, handle, offset, step);
      // Settled later or discarded; never an unhandled rejection.
      bytes.catch(() => undefined);
      queue.push({ offset, bytes });
      nextOffset += step;
    }
  };
  const stream = new Readable({
    highWaterMark: step * 2,
    read() {
      fill();
      const head = queue.shift();
      if (head === undefined) {
        this.push(null);
        return;
      }
      head.bytes.then(
        (chunk) => {
          if (ended) return;
          if (chunk.length === 0) {
            ended = true;
            queue.length = 0;
            this.push(null);
            return;
          }
          if (chunk.length < step) {
            // A short read (usually the end): later reads started past a gap, so start over.
            queue.length = 0;
            nextOffset = head.offset + chunk.length;
          }
          this.push(chunk);
        },
        (error: unknown) => this.destroy(error as Error),
      );
    },
    destroy(error, callback) {
      ended = true;
      queue.length = 0;
      closeQuietly(remote, handle).then(() => callback(error));
    },
  });
  if (signal) {
    const onAbort = () => stream.destroy(signal.reason as Error);
    signal.addEventListener("abort", onAbort, { once: true });
    stream.once("close", () => signal.removeEventListener("abort", onAbort));
  }
  return stream;
}
