import {
  close,
  closeSync,
  type Dir,
  type Dirent,
  fstat,
  fstatSync,
  futimes,
  futimesSync,
  link,
  linkSync,
  lstat,
  lstatSync,
  open,
  opendir,
  opendirSync,
  openSync,
  read,
  readSync,
  rename,
  renameSync,
  rmdir,
  rmdirSync,
  type Stats,
  unlink,
  unlinkSync,
  write,
  writeSync,
} from "node:fs";
import { mkdir } from "node:fs/promises";
import { errorCode } from "./errno.js";

/**
 * The system calls of a local backend, in one of two manners: made on the calling thread
 * (`blockingCalls`), or handed to the libuv thread pool (`threadPoolCalls`). The driver and the
 * readers go through this table only, so both manners share every line of protocol and error
 * handling and differ in nothing but who waits for the kernel.
 */
export interface LocalCalls {
  /** `undefined` for a name that does not exist (ENOENT); other failures throw. */
  lstat(path: string | Buffer): Promise<Stats | undefined>;
  open(path: string | Buffer, flags: number | string, mode?: number): Promise<number>;
  mkdir(path: string | Buffer): Promise<void>;
  rmdir(path: string | Buffer): Promise<void>;
  unlink(path: string | Buffer): Promise<void>;
  link(from: string | Buffer, to: string | Buffer): Promise<void>;
  rename(from: string | Buffer, to: string | Buffer): Promise<void>;
  /** Bytes written, from `offset` of `bytes`, at `position` of the file. */
  write(
    fd: number,
    bytes: Uint8Array,
    offset: number,
    length: number,
    position: number,
  ): Promise<number>;
  /** Bytes read into `into` from `offset`; a `null` position reads on from the file offset. */
  read(
    fd: number,
    into: Uint8Array,
    offset: number,
    length: number,
    position: number | null,
  ): Promise<number>;
  fstat(fd: number): Promise<Stats>;
  futimes(fd: number, seconds: number): Promise<void>;
  close(fd: number): Promise<void>;
  /** A directory listing read as bytes, a batch of entries at a time. */
  opendir(path: string | Buffer): Promise<Dir>;
  readEntry(dir: Dir): Promise<Dirent<Buffer> | null>;
  closeDir(dir: Dir): Promise<void>;
}

const DIR_OPTIONS = { encoding: "buffer" as BufferEncoding, bufferSize: 1024 };

/**
 * How long blocking calls may run back to back before they let the event loop turn: timers (a
 * lease's renewal above all) and IO callbacks wait at most about this long, whatever the size of
 * the run. A 90 000-file publication once spent most of a minute in synchronous opens without the
 * loop turning once, and its lease expired unrenewed (docs/decisions.md, "Blocking calls yield").
 */
export const BLOCKING_SLICE_MS = 10;

let sliceStarted = performance.now();

/**
 * Resolves at once while the current slice is young; past `BLOCKING_SLICE_MS`, after one turn of
 * the event loop (`setImmediate` runs after the loop's timers and IO callbacks).
 */
function yieldSometimes(): Promise<void> | undefined {
  if (performance.now() - sliceStarted < BLOCKING_SLICE_MS) return undefined;
  return new Promise((resolve) =>
    setImmediate(() => {
      sliceStarted = performance.now();
      resolve();
    }),
  );
}

/**
 * Synchronous calls: each answers from the page or inode cache in microseconds, while a
 * thread-pool round trip costs tens of them in handoffs. The CLI's default.
 */
export const blockingCalls: LocalCalls = {
  async lstat(path) {
    await yieldSometimes();
    return lstatSync(path, { throwIfNoEntry: false });
  },
  async open(path, flags, mode) {
    await yieldSometimes();
    return openSync(path, flags, mode);
  },
  // Directories are made on the thread pool in both manners, as they always were: a new
  // directory is rarer than a new file, and its creation waits on the journal as long.
  async mkdir(path) {
    await yieldSometimes();
    await mkdir(path);
  },
  async rmdir(path) {
    await yieldSometimes();
    rmdirSync(path);
  },
  async unlink(path) {
    await yieldSometimes();
    unlinkSync(path);
  },
  async link(from, to) {
    await yieldSometimes();
    linkSync(from, to);
  },
  async rename(from, to) {
    await yieldSometimes();
    renameSync(from, to);
  },
  async write(fd, bytes, offset, length, position) {
    await yieldSometimes();
    return writeSync(fd, bytes, offset, length, position);
  },
  async read(fd, into, offset, length, position) {
    await yieldSometimes();
    return readSync(fd, into, offset, length, position);
  },
  async fstat(fd) {
    await yieldSometimes();
    return fstatSync(fd);
  },
  async futimes(fd, seconds) {
    await yieldSometimes();
    futimesSync(fd, seconds, seconds);
  },
  async close(fd) {
    await yieldSometimes();
    closeSync(fd);
  },
  async opendir(path) {
    await yieldSometimes();
    return opendirSync(path as string, DIR_OPTIONS);
  },
  async readEntry(dir) {
    await yieldSometimes();
    return dir.readSync() as unknown as Dirent<Buffer> | null;
  },
  async closeDir(dir) {
    await yieldSometimes();
    dir.closeSync();
  },
};

/** Settles a promise from a Node callback that passes at most one value. */
function settle<T>(
  resolve: (value: T) => void,
  reject: (error: unknown) => void,
): (error: NodeJS.ErrnoException | null, value?: T) => void {
  return (error, value) => (error ? reject(error) : resolve(value as T));
}

/**
 * Calls on the libuv thread pool: the event loop goes on while the kernel waits, as an O_CREAT
 * open does on ext4 while other writers' fsyncs commit the journal. For a process serving many
 * publications at once (`distributor serve`), where a blocked loop stalls every other request.
 */
export const threadPoolCalls: LocalCalls = {
  lstat(path) {
    return new Promise((resolve, reject) => {
      lstat(path, (error, stats) => {
        if (error === null) resolve(stats);
        else if (errorCode(error) === "ENOENT") resolve(undefined);
        else reject(error);
      });
    });
  },
  open(path, flags, mode) {
    return new Promise((resolve, reject) => open(path, flags, mode, settle(resolve, reject)));
  },
  async mkdir(path) {
    await mkdir(path);
  },
  rmdir(path) {
    return new Promise((resolve, reject) => rmdir(path, settle(resolve, reject)));
  },
  unlink(path) {
    return new Promise((resolve, reject) => unlink(path, settle(resolve, reject)));
  },
  link(from, to) {
    return new Promise((resolve, reject) => link(from, to, settle(resolve, reject)));
  },
  rename(from, to) {
    return new Promise((resolve, reject) => rename(from, to, settle(resolve, reject)));
  },
  write(fd, bytes, offset, length, position) {
    return new Promise((resolve, reject) =>
      write(fd, bytes, offset, length, position, settle(resolve, reject)),
    );
  },
  read(fd, into, offset, length, position) {
    return new Promise((resolve, reject) =>
      read(fd, into, offset, length, position, settle(resolve, reject)),
    );
  },
  fstat(fd) {
    return new Promise((resolve, reject) => fstat(fd, settle(resolve, reject)));
  },
  futimes(fd, seconds) {
    return new Promise((resolve, reject) => futimes(fd, seconds, seconds, settle(resolve, reject)));
  },
  close(fd) {
    return new Promise((resolve, reject) => close(fd, settle(resolve, reject)));
  },
  opendir(path) {
    return new Promise((resolve, reject) =>
      opendir(path as string, DIR_OPTIONS, settle(resolve, reject)),
    );
  },
  async readEntry(dir) {
    return (await dir.read()) as unknown as Dirent<Buffer> | null;
  },
  closeDir(dir) {
    return dir.close();
  },
};
