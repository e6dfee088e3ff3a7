import { randomBytes } from "node:crypto";
import { type FileHandle, open, readdir, readFile, rename, unlink } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { setImmediate as nextTurn } from "node:timers/promises";
import { UploadStoreError } from "@distributor/upload-store";

/**
 * An append-only log of JSON lines with group commit (docs/design/upload-service.md, the embedded
 * store): every change appended while a flush runs, or in the same turn of the event loop, is
 * written with one `write` and made durable with one `fdatasync`; each caller's promise resolves
 * once its own line is on disk. The first line names the format. A line counts only when it ends
 * with a newline and parses: after a crash or a power loss the last line may be torn, and it was
 * never acknowledged. The log is rewritten whole (`snapshot`) when it has grown to several times
 * what it describes, and after a failed write or flush, whose pages the kernel may have dropped.
 */
export interface RecordLog {
  /**
   * Appends `entry`; resolves once it is durable, after `apply` ran (the caller's view of what
   * is durable, which `snapshot` reads). A rejected append's entry is not in the log the store
   * is rewritten to; it may still reappear after a power loss if its bytes reached the disk.
   */
  append(entry: object, apply: () => void): Promise<void>;
  /** Waits for appends in flight, then closes the file. */
  close(): Promise<void>;
}

export interface RecordLogOptions {
  /** The log's file. */
  file: string;
  /** Its first line's `format`. */
  format: string;
  /** Every entry the log should hold if it were written afresh now, in replay order. */
  snapshot: () => Iterable<object>;
  /** Rewrite once the log holds more than this many bytes and twice its last snapshot. */
  compactAfterBytes?: number;
  /** Opens the log for appending; tests wrap the handle to inject write and flush failures. */
  openForAppend?: (file: string) => Promise<FileHandle>;
}

/** Below this size a log is never rewritten: a small log replays in a moment. */
const DEFAULT_COMPACT_AFTER_BYTES = 4 * 1024 * 1024;
const TEMP_SUFFIX = ".tmp";

/**
 * The entries of the log at `file` (none when it does not exist yet), the format line checked.
 * A torn last line is left out; a bad line with good lines after it is damage, refused with the
 * line's number.
 */
export async function readRecordLog(
  file: string,
  format: string,
): Promise<Record<string, unknown>[]> {
  let bytes: Buffer;
  try {
    bytes = await readFile(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw error;
  }
  const entries: Record<string, unknown>[] = [];
  let damaged: { line: number; problem: string } | undefined;
  let start = 0;
  for (let line = 1; start < bytes.length; line++) {
    const end = bytes.indexOf(10, start);
    // No newline: a line whose write did not finish.
    if (end < 0) break;
    const text = bytes.toString("utf8", start, end);
    start = end + 1;
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (error) {
      damaged ??= { line, problem: `is not JSON: ${(error as Error).message}` };
      continue;
    }
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      damaged ??= { line, problem: "is not a JSON object" };
      continue;
    }
    if (damaged !== undefined) {
      throw new UploadStoreError(
        "store_unreadable",
        `upload store log ${file} line ${damaged.line} ${damaged.problem}, and later lines are whole; restore the store from a backup or move the file away`,
      );
    }
    entries.push(value as Record<string, unknown>);
  }
  const header = entries.shift();
  if (header === undefined) {
    // Created, never written past its first line: nothing was ever acknowledged from it.
    return [];
  }
  if (header.format !== format) {
    throw new UploadStoreError(
      "store_unreadable",
      `upload store log ${file} is not a ${format} log (its first line has format ${JSON.stringify(header.format)}); restore the store from a backup or move the file away`,
    );
  }
  return entries;
}

/**
 * Writes the log afresh from `options.snapshot()` (a temporary file flushed, then renamed over
 * the log and the directory flushed) and opens it for appending. The caller owns the log: one
 * process opens it at a time (the store's lock), so a temporary file of an earlier rewrite that
 * died half-way is removed first.
 */
export async function openRecordLog(options: RecordLogOptions): Promise<RecordLog> {
  const minimum = options.compactAfterBytes ?? DEFAULT_COMPACT_AFTER_BYTES;
  await removeTemporaryFiles(options.file);
  let handle: FileHandle = await rewrite(options);
  let bytes = (await handle.stat()).size;
  let compactAt = Math.max(minimum, 2 * bytes);
  type Waiter = {
    text: string;
    apply: () => void;
    resolve: () => void;
    reject: (e: Error) => void;
  };
  let pending: Waiter[] = [];
  let running: Promise<void> | undefined;
  /** Set after a failed write or flush: the next batch goes to a log written afresh. */
  let broken: Error | undefined;
  let closed = false;

  const compact = async () => {
    const fresh = await rewrite(options);
    await handle.close().catch(() => undefined);
    handle = fresh;
    bytes = (await handle.stat()).size;
    compactAt = Math.max(minimum, 2 * bytes);
  };

  const commit = async (batch: Waiter[]) => {
    if (broken !== undefined) {
      await compact();
      broken = undefined;
    }
    const text = Buffer.from(batch.map((waiter) => waiter.text).join(""));
    try {
      let written = 0;
      while (written < text.length) {
        const result = await handle.write(text, written, text.length - written);
        written += result.bytesWritten;
      }
      await handle.datasync();
    } catch (error) {
      broken = error as Error;
      throw error;
    }
    bytes += text.length;
  };

  const loop = async () => {
    // Changes made in this turn of the event loop join the first batch.
    await nextTurn();
    while (pending.length > 0) {
      const batch = pending;
      pending = [];
      try {
        await commit(batch);
      } catch (error) {
        const failure = storeWriteError(options.file, error);
        for (const waiter of batch) waiter.reject(failure);
        continue;
      }
      for (const waiter of batch) waiter.apply();
      for (const waiter of batch) waiter.resolve();
      if (bytes > compactAt) {
        // The log stays valid if rewriting it fails; the next batch tries again later.
        await compact().catch(() => {
          compactAt = 2 * bytes;
        });
      }
    }
  };

  const kick = () => {
    if (running !== undefined) return;
    running = loop().finally(() => {
      running = undefined;
      if (pending.length > 0) kick();
    });
  };

  return {
    append(entry, apply) {
      if (closed) {
        return Promise.reject(
          new UploadStoreError("store_closed", `upload store log ${options.file} is closed`),
        );
      }
      return new Promise<void>((resolve, reject) => {
        pending.push({ text: `${JSON.stringify(entry)}\n`, apply, resolve, reject });
        kick();
      });
    },
    async close() {
      closed = true;
      while (running !== undefined) await running;
      await handle.close();
    },
  };
}

async function removeTemporaryFiles(file: string): Promise<void> {
  const prefix = `.${basename(file)}.`;
  for (const name of await readdir(dirname(file))) {
    if (name.startsWith(prefix) && name.endsWith(TEMP_SUFFIX)) {
      await unlink(join(dirname(file), name)).catch(() => undefined);
    }
  }
}

async function rewrite(options: RecordLogOptions): Promise<FileHandle> {
  const directory = dirname(options.file);
  const temp = join(
    directory,
    `.${basename(options.file)}.${randomBytes(6).toString("hex")}${TEMP_SUFFIX}`,
  );
  const writer = await open(temp, "wx", 0o600);
  try {
    const lines = [`${JSON.stringify({ format: options.format })}\n`];
    let size = lines[0]?.length ?? 0;
    for (const entry of options.snapshot()) {
      const line = `${JSON.stringify(entry)}\n`;
      lines.push(line);
      size += line.length;
      // Written in slices, so a big store never becomes one string.
      if (size >= 1024 * 1024) {
        await writer.write(lines.join(""));
        lines.length = 0;
        size = 0;
      }
    }
    if (lines.length > 0) await writer.write(lines.join(""));
    await writer.sync();
  } catch (error) {
    await writer.close().catch(() => undefined);
    await unlink(temp).catch(() => undefined);
    throw storeWriteError(options.file, error);
  }
  await writer.close();
  try {
    await rename(temp, options.file);
    await syncDirectory(directory);
  } catch (error) {
    await unlink(temp).catch(() => undefined);
    throw storeWriteError(options.file, error);
  }
  return options.openForAppend?.(options.file) ?? open(options.file, "a", 0o600);
}

export async function syncDirectory(directory: string): Promise<void> {
  const handle = await open(directory, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

function storeWriteError(file: string, error: unknown): UploadStoreError {
  if (error instanceof UploadStoreError) return error;
  return new UploadStoreError(
    "store_write_failed",
    `upload store log ${file} could not be written: ${(error as Error).message}`,
    { cause: error },
  );
}
