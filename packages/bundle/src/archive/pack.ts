import { constants } from "node:fs";
import { type FileHandle, open } from "node:fs/promises";
import { join } from "node:path";
import { addAbortSignal, pipeline, Readable } from "node:stream";
import { createGzip } from "node:zlib";
import { createLocalBackend, type StorageEntry } from "@distributor/storage";
import type { HeaderData } from "tar";
import { walkBundle, walkLimit } from "../bundle-walk.js";
import { type BundleIssue, type BundleIssueCode, BundleValidationError } from "../errors.js";
import { DEFAULT_MAX_FILES } from "../validate.js";
import { loadTar, type Tar } from "./tar.js";

/** Modes written for every entry: archives do not carry the producer's umask or execute bits. */
export const ARCHIVE_FILE_MODE = 0o644;
export const ARCHIVE_DIRECTORY_MODE = 0o755;
/** The `Content-Type` of a packed bundle (docs/integrations/http-upload.md). */
export const BUNDLE_ARCHIVE_CONTENT_TYPE = "application/gzip";

const BLOCK = 512;
/** Bytes read from a file at once; the only part of a file held in memory. */
const READ_CHUNK = 64 * 1024;

export interface PackBundleOptions {
  /** Most files and directories to pack; default enough for `maxFiles` files. */
  maxEntries?: number;
  /** The most files the bundle may list (as validated): sizes the default `maxEntries`; default 10000. */
  maxFiles?: number;
  /** Modification time written for every entry; default the Unix epoch, for reproducible archives. */
  mtime?: Date;
  signal?: AbortSignal;
}

export interface PackedBundle {
  /** The gzip-compressed tar archive. Reading it reads the files; it can be read only once. */
  stream: Readable;
  /** Regular files in the archive (`manifest.json` included) and the sum of their sizes. */
  files: number;
  directories: number;
  size: number;
}

/**
 * Packs the bundle directory `directory` into a gzip-compressed tar stream (docs/design/bundles.md "Archive"):
 * every regular file and directory below it, at the archive root, in ascending byte order of path
 * (so parents precede children), with portable headers (modes 0644/0755, no owner ids or names, one
 * fixed mtime). Symlinks, special files, names that are no logical path and distributor's reserved
 * names are refused before anything is read, naming each offending path. Files are streamed a chunk
 * at a time while the archive is read, and a file that changes meanwhile fails the stream.
 */
export async function packBundle(
  directory: string,
  options: PackBundleOptions = {},
): Promise<PackedBundle> {
  const limit = options.maxEntries ?? walkLimit(options.maxFiles ?? DEFAULT_MAX_FILES);
  const backend = createLocalBackend({ root: directory });
  const listing = await walkBundle(backend, "", limit, {
    signal: options.signal,
    limitNote: `the archive holds at most ${limit} entries`,
  }).catch((error: unknown) => {
    // Issues are relative to the bundle; say which directory they are about.
    if (error instanceof BundleValidationError) {
      throw new BundleValidationError(error.issues, { bundlePath: directory, cause: error.cause });
    }
    throw error;
  });
  if (listing.issues.length > 0) {
    throw new BundleValidationError(listing.issues, { bundlePath: directory });
  }
  const entries = listing.entries;
  const mtime = options.mtime ?? new Date(0);
  const files = entries.filter((entry) => entry.kind === "file");

  const source = Readable.from(archiveChunks(directory, entries, mtime), { objectMode: false });
  const gzip = createGzip();
  // Errors reach the consumer through `gzip`; destroying it closes the file being read.
  const stream = pipeline(source, gzip, () => {});
  if (options.signal !== undefined) addAbortSignal(options.signal, stream);
  return {
    stream,
    files: files.length,
    directories: entries.length - files.length,
    size: files.reduce((sum, entry) => sum + entry.size, 0),
  };
}

async function* archiveChunks(
  directory: string,
  entries: readonly StorageEntry[],
  mtime: Date,
): AsyncGenerator<Buffer> {
  const tar = await loadTar();
  for (const entry of entries) {
    if (entry.kind === "directory") {
      yield* headerBlocks(tar, {
        path: `${entry.path}/`,
        type: "Directory",
        mode: ARCHIVE_DIRECTORY_MODE,
        size: 0,
        mtime,
      });
    } else {
      yield* fileBlocks(tar, directory, entry.path, mtime);
    }
  }
  // End of archive: two zero blocks.
  yield Buffer.alloc(BLOCK * 2);
}

function* headerBlocks(tar: Tar, data: HeaderData): Generator<Buffer> {
  const header = new tar.Header({ ...data, uid: 0, gid: 0, uname: "", gname: "" });
  // A path longer than the ustar fields takes goes into a pax extended header first.
  if (header.encode())
    yield new tar.Pax({ path: data.path, size: data.size, mtime: data.mtime }).encode();
  if (header.block === undefined) throw new Error(`tar header for ${data.path} was not encoded`);
  yield header.block;
}

async function* fileBlocks(
  tar: Tar,
  directory: string,
  path: string,
  mtime: Date,
): AsyncGenerator<Buffer> {
  let handle: FileHandle;
  try {
    // O_NOFOLLOW: a file swapped for a symlink since the walk is refused, not followed.
    handle = await open(join(directory, path), constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (error) {
    throw changed(
      directory,
      path,
      "not_regular_file",
      `cannot be opened: ${(error as Error).message}`,
      error,
    );
  }
  try {
    const before = await handle.stat();
    if (!before.isFile())
      throw changed(directory, path, "not_regular_file", "is no longer a regular file");
    const size = before.size;
    yield* headerBlocks(tar, { path, type: "File", mode: ARCHIVE_FILE_MODE, size, mtime });
    let position = 0;
    while (position < size) {
      const chunk = Buffer.allocUnsafe(Math.min(READ_CHUNK, size - position));
      const { bytesRead } = await handle.read(chunk, 0, chunk.length, position);
      if (bytesRead === 0) {
        throw changed(
          directory,
          path,
          "size_mismatch",
          `shrank while packing: ${size} bytes expected, ${position} read`,
        );
      }
      position += bytesRead;
      yield bytesRead === chunk.length ? chunk : chunk.subarray(0, bytesRead);
    }
    const after = await handle.stat();
    if (after.size !== size || after.mtimeMs !== before.mtimeMs) {
      throw changed(directory, path, "size_mismatch", "changed while packing");
    }
    const padding = (BLOCK - (size % BLOCK)) % BLOCK;
    if (padding > 0) yield Buffer.alloc(padding);
  } finally {
    await handle.close();
  }
}

function changed(
  directory: string,
  path: string,
  code: BundleIssueCode,
  detail: string,
  cause?: unknown,
): BundleValidationError {
  const issue: BundleIssue = { code, path, message: `${path}: ${detail}` };
  return new BundleValidationError([issue], { bundlePath: directory, cause });
}
