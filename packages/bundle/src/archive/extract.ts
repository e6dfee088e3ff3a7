import { constants } from "node:fs";
import { lstat, mkdir, open, readdir } from "node:fs/promises";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGunzip } from "node:zlib";
import { isReservedName, pathProblem } from "@distributor/storage";
import type { ReadEntry } from "tar";
import { MANIFEST_FILE_NAME } from "../manifest-checks.js";
import { loadTar } from "./tar.js";

/** Why an upload archive was refused (docs/design/bundles.md "Archive"). */
export type ArchiveErrorCode =
  /** Not a tar (or gzip tar) stream, truncated, or a corrupt header. */
  | "invalid_archive"
  /** An absolute path, a `..` segment, or a name that is not a valid logical path. */
  | "unsafe_path"
  /** A link, device, FIFO or any entry that is not a regular file or a directory. */
  | "unsupported_entry"
  /** The same path twice, or a file where a directory is (or the other way round). */
  | "duplicate_entry"
  /** `.distributor.json`, a lease or a temp name at any depth. */
  | "reserved_name"
  /** More extracted bytes than the limit allows (a gzip bomb stops here). */
  | "extracted_size_exceeded"
  /** More entries than the limit allows. */
  | "too_many_entries"
  /** No `manifest.json` at the root nor in a single top-level directory. */
  | "no_bundle";

/** Codes that mean "too large" rather than "malformed" (an HTTP server answers 413 for them). */
export const ARCHIVE_LIMIT_CODES: ReadonlySet<ArchiveErrorCode> = new Set([
  "extracted_size_exceeded",
  "too_many_entries",
]);

/** An upload archive broke a rule; `path` is the archive entry concerned, when there is one. */
export class ArchiveError extends Error {
  override readonly name = "ArchiveError";
  readonly code: ArchiveErrorCode;
  readonly path: string | undefined;

  constructor(
    code: ArchiveErrorCode,
    message: string,
    options: { path?: string; cause?: unknown } = {},
  ) {
    super(message, { cause: options.cause });
    this.code = code;
    this.path = options.path;
  }
}

export interface ExtractArchiveOptions {
  /** Largest sum of regular file sizes, in bytes. */
  maxExtractedSize: number;
  /** Largest number of entries (files and directories). */
  maxEntries: number;
  signal?: AbortSignal;
}

export interface ExtractedArchive {
  /** Regular files written. */
  files: number;
  /** Directory entries and directories implied by file paths. */
  directories: number;
  /** Sum of the sizes of the files written. */
  bytes: number;
  /** The bundle directory relative to the staging directory: `""`, or the single top-level directory. */
  bundlePath: string;
  /** True when the stream was gzip-compressed. */
  gzip: boolean;
}

const GZIP_MAGIC = [0x1f, 0x8b] as const;
/** Room per entry for its header block, padding and a pax header with a long path. */
const ENTRY_OVERHEAD_BYTES = 4096;
/** End-of-archive blocks and record padding. */
const TRAILER_BYTES = 20 * 512;
/** Pax and GNU long-name headers larger than this are refused, not parsed. */
const MAX_META_ENTRY_SIZE = 64 * 1024;

/**
 * Streams a tar or gzip-compressed tar (detected by its magic bytes) into `directory`, which must
 * exist and be empty. Only regular files and directories are created, each file with an exclusive
 * create, so nothing can land outside `directory` or replace what an earlier entry wrote. Links,
 * devices and every other entry type, absolute paths, `..`, names that are not valid logical paths
 * (docs/design/bundles.md), reserved names and duplicate entries are refused, and the limits are enforced while
 * streaming: a gzip bomb stops at `maxExtractedSize`. One chunk at a time is held in memory.
 *
 * On failure an `ArchiveError` is thrown and whatever was written stays in `directory`: the
 * caller owns it and removes it.
 */
export async function extractArchive(
  input: Readable | AsyncIterable<Uint8Array>,
  directory: string,
  options: ExtractArchiveOptions,
): Promise<ExtractedArchive> {
  const remaining = await readdir(directory);
  if (remaining.length > 0) {
    throw new Error(`staging directory ${directory} is not empty`);
  }
  const extraction = new Extraction(directory, options);
  let gzip = false;
  await pipeline(
    input,
    async function* sniff(source: AsyncIterable<Uint8Array>): AsyncGenerator<Buffer> {
      // Only the first bytes decide; everything is passed on unchanged.
      let head: Buffer | undefined = Buffer.alloc(0);
      for await (const chunk of source) {
        if (head === undefined) {
          yield Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk);
          continue;
        }
        head = Buffer.concat([head, chunk]);
        if (head.length < GZIP_MAGIC.length) continue;
        gzip = head[0] === GZIP_MAGIC[0] && head[1] === GZIP_MAGIC[1];
        yield head;
        head = undefined;
      }
      if (head !== undefined && head.length > 0) yield head;
    },
    async function* decompress(source: AsyncIterable<Buffer>) {
      const iterator = source[Symbol.asyncIterator]();
      const first = await iterator.next();
      if (first.done) return;
      const rest = (async function* () {
        yield first.value;
        for (let next = await iterator.next(); !next.done; next = await iterator.next()) {
          yield next.value;
        }
      })();
      if (!gzip) {
        yield* rest;
        return;
      }
      const gunzip = createGunzip();
      // A failure of the input itself (a body over its limit, a lost client) is not a gzip error.
      let inputError: unknown;
      const feeding = pipeline(rest, gunzip).catch((error: unknown) => {
        inputError ??= error;
        gunzip.destroy(error as Error);
      });
      try {
        yield* gunzip;
      } catch (error) {
        await feeding;
        if (inputError !== undefined && !isZlibError(inputError)) throw inputError;
        throw new ArchiveError("invalid_archive", `archive is not valid gzip: ${message(error)}`, {
          cause: error,
        });
      }
      await feeding;
      if (inputError !== undefined) throw inputError;
    },
    (source: AsyncIterable<Buffer>) => extraction.consume(source),
    ...(options.signal ? [{ signal: options.signal }] : []),
  ).catch((error: unknown) => {
    throw extraction.failure ?? error;
  });
  const bundlePath = await locateBundle(directory);
  return { ...extraction.totals(), bundlePath, gzip };
}

/**
 * The bundle directory of an extracted archive: the root when it holds `manifest.json`, else its
 * single top-level directory when that holds one.
 */
export async function locateBundle(directory: string): Promise<string> {
  if (await isFile(join(directory, MANIFEST_FILE_NAME))) return "";
  const entries = await readdir(directory, { withFileTypes: true });
  const only = entries[0];
  if (entries.length === 1 && only?.isDirectory()) {
    if (await isFile(join(directory, only.name, MANIFEST_FILE_NAME))) return only.name;
  }
  throw new ArchiveError(
    "no_bundle",
    `archive holds no ${MANIFEST_FILE_NAME} at its root or in a single top-level directory`,
  );
}

async function isFile(path: string): Promise<boolean> {
  try {
    return (await lstat(path)).isFile();
  } catch {
    return false;
  }
}

const REGULAR_TYPES: ReadonlySet<string> = new Set(["File", "OldFile", "ContiguousFile"]);

const ENTRY_TYPE_NAMES: Readonly<Record<string, string>> = {
  Link: "hard link",
  SymbolicLink: "symbolic link",
  CharacterDevice: "character device",
  BlockDevice: "block device",
  FIFO: "FIFO",
};

/** The state of one extraction: what exists so far and what the limits still allow. */
class Extraction {
  failure: ArchiveError | Error | undefined;
  private readonly kinds = new Map<string, "file" | "directory">();
  private readonly explicit = new Set<string>();
  private entries = 0;
  private files = 0;
  private bytes = 0;
  private readonly maxTarBytes: number;

  constructor(
    private readonly directory: string,
    private readonly options: ExtractArchiveOptions,
  ) {
    this.maxTarBytes =
      options.maxExtractedSize + (options.maxEntries + 2) * ENTRY_OVERHEAD_BYTES + TRAILER_BYTES;
  }

  totals() {
    let directories = 0;
    for (const kind of this.kinds.values()) if (kind === "directory") directories += 1;
    return { files: this.files, directories, bytes: this.bytes };
  }

  /** Feeds the (decompressed) tar stream to the parser, one chunk at a time. */
  async consume(source: AsyncIterable<Buffer>): Promise<void> {
    const { Parser } = await loadTar();
    const parser = new Parser({ strict: true, zstd: false, maxMetaEntrySize: MAX_META_ENTRY_SIZE });
    let rejectFailure: (error: unknown) => void = () => undefined;
    const failed = new Promise<never>((_resolve, reject) => {
      rejectFailure = reject;
    });
    failed.catch(() => undefined);
    const fail = (error: unknown) => {
      if (this.failure !== undefined) return;
      this.failure =
        error instanceof ArchiveError
          ? error
          : new ArchiveError("invalid_archive", `archive is not a valid tar: ${message(error)}`, {
              cause: error,
            });
      rejectFailure(this.failure);
    };
    let entries: Promise<void> = Promise.resolve();
    parser.on("entry", (entry: ReadEntry) => {
      entries = entries.then(() =>
        this.failure === undefined ? this.entry(entry).catch(fail) : undefined,
      );
    });
    parser.on("ignoredEntry", (entry: ReadEntry) => {
      fail(
        new ArchiveError(
          "unsupported_entry",
          `${printable(entry.path)}: ${entry.meta ? "oversized extended header" : `entry type ${entry.header.type ?? "unknown"}`} is not allowed (only regular files and directories)`,
          { path: entry.path },
        ),
      );
    });
    parser.on("error", fail);
    const ended = new Promise<void>((resolve) => parser.on("end", () => resolve()));

    let tarBytes = 0;
    for await (const chunk of source) {
      if (this.failure !== undefined) throw this.failure;
      // The parser would decompress a second layer on its own, past the limits' accounting.
      if (tarBytes === 0 && chunk[0] === GZIP_MAGIC[0] && chunk[1] === GZIP_MAGIC[1]) {
        fail(new ArchiveError("invalid_archive", "archive is compressed twice"));
        throw this.failure;
      }
      tarBytes += chunk.length;
      if (tarBytes > this.maxTarBytes) {
        fail(this.sizeExceeded());
        throw this.failure;
      }
      if (!parser.write(chunk)) {
        await Promise.race([new Promise((resolve) => parser.once("drain", resolve)), failed]);
      }
    }
    parser.end();
    await Promise.race([ended, failed]);
    await Promise.race([entries, failed]);
    if (this.failure !== undefined) throw this.failure;
  }

  private sizeExceeded(): ArchiveError {
    return new ArchiveError(
      "extracted_size_exceeded",
      `archive extracts to more than ${this.options.maxExtractedSize} bytes`,
    );
  }

  private async entry(entry: ReadEntry): Promise<void> {
    this.entries += 1;
    if (this.entries > this.options.maxEntries) {
      throw new ArchiveError(
        "too_many_entries",
        `archive has more than ${this.options.maxEntries} entries`,
      );
    }
    const isDirectory = entry.type === "Directory";
    const raw = entry.path;
    if (!isDirectory && !REGULAR_TYPES.has(entry.type)) {
      const what = ENTRY_TYPE_NAMES[entry.type] ?? `${entry.type} entry`;
      throw new ArchiveError(
        "unsupported_entry",
        `${printable(raw)}: ${what} is not allowed (only regular files and directories)`,
        { path: raw },
      );
    }
    const path = entryPath(raw, isDirectory);
    if (path === "") {
      // `./` — the archive root itself.
      if (isDirectory) return drain(entry);
      throw new ArchiveError("unsafe_path", `${printable(raw)}: a file needs a name`, {
        path: raw,
      });
    }
    if (this.explicit.has(path)) {
      throw new ArchiveError("duplicate_entry", `${path}: appears more than once in the archive`, {
        path,
      });
    }
    this.explicit.add(path);
    const existing = this.kinds.get(path);
    if (existing !== undefined && (existing === "file" || !isDirectory)) {
      throw new ArchiveError(
        "duplicate_entry",
        `${path}: is both a file and a directory in the archive`,
        { path },
      );
    }
    await this.parents(path);
    if (isDirectory) {
      this.kinds.set(path, "directory");
      await mkdir(join(this.directory, path), { recursive: true });
      return drain(entry);
    }
    if (entry.size > this.options.maxExtractedSize - this.bytes) throw this.sizeExceeded();
    this.kinds.set(path, "file");
    await this.writeFile(path, entry);
  }

  /** Records and creates the directories a path implies; none may be a file. */
  private async parents(path: string): Promise<void> {
    const segments = path.split("/");
    for (let end = 1; end < segments.length; end++) {
      const parent = segments.slice(0, end).join("/");
      const kind = this.kinds.get(parent);
      if (kind === "file") {
        throw new ArchiveError(
          "duplicate_entry",
          `${path}: its parent ${parent} is a file in the archive`,
          { path },
        );
      }
      if (kind === undefined) this.kinds.set(parent, "directory");
    }
    if (segments.length > 1) {
      await mkdir(join(this.directory, ...segments.slice(0, -1)), { recursive: true });
    }
  }

  private async writeFile(path: string, entry: ReadEntry): Promise<void> {
    // Exclusive create without following links: never replaces nor writes through anything.
    const handle = await open(
      join(this.directory, path),
      constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
      0o644,
    );
    let written = 0;
    try {
      for await (const chunk of entry as AsyncIterable<Buffer>) {
        written += chunk.length;
        this.bytes += chunk.length;
        if (this.bytes > this.options.maxExtractedSize) throw this.sizeExceeded();
        await handle.write(chunk);
      }
    } finally {
      await handle.close();
    }
    if (written !== entry.size) {
      throw new ArchiveError(
        "invalid_archive",
        `${path}: archive ends inside the entry (${written} of ${entry.size} bytes)`,
        { path },
      );
    }
    this.files += 1;
  }
}

/** The logical path of an entry: `./` prefixes and a directory's trailing `/` are packaging. */
function entryPath(raw: string, isDirectory: boolean): string {
  if (raw.startsWith("/")) {
    throw new ArchiveError("unsafe_path", `${printable(raw)}: absolute paths are not allowed`, {
      path: raw,
    });
  }
  let path = raw;
  while (path.startsWith("./")) path = path.slice(2);
  if (path === ".") path = "";
  if (isDirectory && path.endsWith("/")) path = path.slice(0, -1);
  if (path === "") return "";
  if (path.split("/").includes("..")) {
    throw new ArchiveError("unsafe_path", `${printable(raw)}: ".." segments are not allowed`, {
      path: raw,
    });
  }
  if (path.includes("\uFFFD")) {
    throw new ArchiveError("unsafe_path", `${printable(raw)}: name is not valid UTF-8`, {
      path: raw,
    });
  }
  const problem = pathProblem(path);
  if (problem !== undefined) {
    throw new ArchiveError("unsafe_path", `${printable(raw)}: ${problem}`, { path: raw });
  }
  const reserved = path.split("/").find(isReservedName);
  if (reserved !== undefined) {
    throw new ArchiveError(
      "reserved_name",
      `${path}: ${reserved} is a name distributor reserves for itself`,
      { path },
    );
  }
  return path;
}

function drain(entry: ReadEntry): Promise<void> {
  return new Promise((resolve) => {
    entry.on("end", () => resolve());
    entry.resume();
  });
}

/** An entry name as it can be shown in one line of a message. */
function printable(path: string): string {
  return JSON.stringify(path);
}

function isZlibError(error: unknown): boolean {
  const code = (error as { code?: unknown } | undefined)?.code;
  return typeof code === "string" && code.startsWith("Z_");
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
