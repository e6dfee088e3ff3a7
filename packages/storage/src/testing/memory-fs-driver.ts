import { setImmediate as nextTurn } from "node:timers/promises";
import { nativeCode, nativeErrorMapper } from "../adapter/backend-error.js";
import type { StorageError, StorageErrorKind, StorageOperation } from "../errors.js";
import type {
  FsCapabilities,
  FsDirEntry,
  FsDriver,
  FsFailure,
  FsPath,
  FsStats,
} from "../fs-protocol/driver.js";

/**
 * A file's bytes and times, shared by every name linked to it and every open handle, and what of
 * them is on the disk: the bytes and mtime as of its last fsync (empty if never flushed).
 */
interface Inode {
  ino: number;
  bytes: Buffer;
  mtimeMs: number;
  durable: Buffer;
  durableMtimeMs: number;
}

type Node =
  | { kind: "directory"; mtimeMs: number }
  | { kind: "file"; inode: Inode }
  | { kind: "symlink"; target?: string };

interface OpenFile {
  inode: Inode;
  writable: boolean;
}

/** One name of a tree, as `image()` gives it and the `image` option takes it. */
export type FsImageEntry =
  | { path: string; kind: "directory" }
  /** Names sharing `inode` are hard links of one file. */
  | { path: string; kind: "file"; inode: number; bytes: Uint8Array; mtimeMs: number }
  | { path: string; kind: "symlink"; target: string };

/**
 * What survives a power cut, of the orders POSIX (and ext4 and XFS in their default modes) allow
 * for what was not flushed (docs/design/power-loss.md):
 * - `flushed_only`: nothing that was not flushed: each directory holds the names it held at its
 *   last fsync, each file the bytes it held at its last fsync.
 * - `names_first`: every name operation (create, link, rename, unlink, mkdir, rmdir) reached the
 *   disk, but no file data that was not flushed: a name can point to a file whose bytes never
 *   landed.
 */
export type PowerCutOrder = "flushed_only" | "names_first";

export interface MemoryFsDriverOptions {
  /** Capabilities to declare instead of the defaults (all present, requests not ordered). */
  capabilities?: Partial<FsCapabilities>;
  /**
   * Seeds the interleaving: every request waits 0–3 turns of the event loop, chosen by a small
   * deterministic generator from this seed, so concurrent operations overlap differently per seed.
   */
  seed?: number;
  /** The tree to start with, all of it on the disk (as `image()` of another driver gives it). */
  image?: readonly FsImageEntry[];
}

const DEFAULTS: FsCapabilities = {
  atomicReplace: true,
  hardLink: true,
  atomicMoveNoClobber: false,
  fileSync: true,
  directorySync: true,
  coarseMtime: false,
  orderedRequests: false,
  rememberDirectories: false,
  localClock: true,
  staleSwapLockMs: 200,
  writeBlockBytes: 64 * 1024,
  readBlockBytes: 64 * 1024,
  writesInFlight: 4,
  readsInFlight: 4,
  parallelism: 8,
};

const KIND_BY_CODE: Record<string, StorageErrorKind> = {
  ENOENT: "not_found",
  ENOTDIR: "not_found",
  EEXIST: "already_exists",
  ENOTEMPTY: "not_empty",
  EISDIR: "unsupported",
  ELOOP: "unsupported",
  ENOTSUP: "unsupported",
};

const FAILURE_BY_CODE: Record<string, FsFailure> = {
  ENOENT: "not_found",
  EEXIST: "exists",
  ENOTDIR: "not_directory",
  ENOTSUP: "unsupported",
};

function fail(code: string, path: FsPath): Error {
  const shown = typeof path === "string" ? path : Buffer.from(path).toString("utf8");
  return Object.assign(new Error(`${code}: ${shown}`), { code });
}

/**
 * An `FsDriver` over a tree in memory with POSIX semantics (names link to inodes, handles hold
 * inodes, rename replaces atomically, link and exclusive create refuse an existing name). It is a
 * driver like the local and SFTP ones, not a mock: the protocol runs on it unchanged, and every
 * request yields to the event loop so concurrent operations interleave. With `orderedRequests`
 * requests are carried out strictly in the order sent, as on one SFTP channel.
 */
export class MemoryFsDriver implements FsDriver<number> {
  readonly name = "memory-fs";
  readonly capabilities: FsCapabilities;
  readonly #nodes = new Map<string, Node>([["", { kind: "directory", mtimeMs: 0 }]]);
  /** Per directory node: its names as of its last fsync (what a power cut leaves of it). */
  readonly #durable = new Map<Node, Map<string, Node>>();
  /** Set by a power cut: every request of this driver fails from then on. */
  #dead = false;
  readonly #handles = new Map<number, OpenFile>();
  #nextHandle = 1;
  #nextIno = 1;
  /** A clock that moves on every change, so versions never repeat unless mtimes are coarse. */
  #clock = 1_700_000_000_000;
  #random: number;
  #queue: Promise<unknown> = Promise.resolve();
  readonly #toStorageError: (e: unknown, op: StorageOperation, path: string) => StorageError;

  constructor(options: MemoryFsDriverOptions = {}) {
    this.capabilities = { ...DEFAULTS, ...options.capabilities };
    this.#random = (options.seed ?? 1) >>> 0 || 1;
    this.#toStorageError = nativeErrorMapper(this.name, (error) => ({
      kind: KIND_BY_CODE[nativeCode(error, "string") ?? ""] ?? "unavailable",
      detail: error instanceof Error ? error.message : String(error),
    }));
    // A disk loaded from a real directory goes on from now, as the real one would.
    if (options.image !== undefined) this.#clock = Math.max(this.#clock, Date.now());
    const inodes = new Map<number, Inode>();
    for (const entry of options.image ?? []) {
      if (entry.path === "") continue;
      if (entry.kind === "file") {
        let inode = inodes.get(entry.inode);
        if (inode === undefined) {
          const bytes = Buffer.from(entry.bytes);
          // The inode number is kept, as a disk keeps it, and with it every version token.
          inode = {
            ino: entry.inode,
            bytes,
            mtimeMs: entry.mtimeMs,
            durable: bytes,
            durableMtimeMs: entry.mtimeMs,
          };
          inodes.set(entry.inode, inode);
        }
        this.#nodes.set(entry.path, { kind: "file", inode });
      } else if (entry.kind === "directory") {
        this.#nodes.set(entry.path, { kind: "directory", mtimeMs: this.#tick() });
      } else {
        this.#nodes.set(entry.path, { kind: "symlink", target: entry.target });
      }
    }
    this.#nextIno = Math.max(0, ...inodes.keys()) + 1;
    for (const [path, node] of this.#nodes) {
      if (node.kind === "directory") this.#durable.set(node, this.#children(path));
    }
  }

  /** The tree as it is now, directories before what they hold. */
  image(): FsImageEntry[] {
    return [...this.#nodes.entries()]
      .filter(([path]) => path !== "")
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([path, node]): FsImageEntry => {
        if (node.kind === "directory") return { path, kind: "directory" };
        if (node.kind === "symlink") return { path, kind: "symlink", target: node.target ?? "" };
        const { inode } = node;
        return {
          path,
          kind: "file",
          inode: inode.ino,
          bytes: Buffer.from(inode.bytes),
          mtimeMs: inode.mtimeMs,
        };
      });
  }

  /**
   * The power fails: this driver (the process that used it) is gone, and every request it still
   * makes fails. Returns a driver over what the disk holds when the machine comes back, in the
   * given order of what reached it (see `PowerCutOrder`), with the same capabilities.
   */
  powerCut(order: PowerCutOrder): MemoryFsDriver {
    this.#dead = true;
    for (const handle of this.#handles.keys()) this.#handles.delete(handle);
    const image: FsImageEntry[] = [];
    const visit = (path: string, directory: Node) => {
      const names = order === "flushed_only" ? this.#durable.get(directory) : this.#children(path);
      for (const [name, node] of names ?? []) {
        const child = path === "" ? name : `${path}/${name}`;
        if (node.kind === "directory") {
          image.push({ path: child, kind: "directory" });
          visit(child, node);
        } else if (node.kind === "symlink") {
          image.push({ path: child, kind: "symlink", target: node.target ?? "" });
        } else {
          const { inode } = node;
          image.push({
            path: child,
            kind: "file",
            inode: inode.ino,
            bytes: inode.durable,
            mtimeMs: inode.durableMtimeMs,
          });
        }
      }
    };
    visit("", this.#nodes.get("") as Node);
    return new MemoryFsDriver({ capabilities: this.capabilities, seed: this.#random, image });
  }

  /** Every name in the tree with its kind, for tests to compare with what a backend reports. */
  entries(): string[] {
    return [...this.#nodes.entries()]
      .filter(([path]) => path !== "")
      .map(([path, node]) => `${node.kind} ${path}`)
      .sort();
  }

  /** Puts a symlink at `path` (its parent must exist), to test that the protocol refuses it. */
  addSymlink(path: string): void {
    this.#nodes.set(path, { kind: "symlink" });
  }

  /** How many handles are still open: zero once every operation has ended. */
  get openHandles(): number {
    return this.#handles.size;
  }

  lacks(capability: "atomicReplace" | "hardLink"): string {
    return `the in-memory store has no ${capability === "hardLink" ? "hard links" : "atomic rename"}`;
  }

  classify(error: unknown): FsFailure {
    return FAILURE_BY_CODE[nativeCode(error, "string") ?? ""] ?? "other";
  }

  toStorageError(error: unknown, operation: StorageOperation, path: string): StorageError {
    return this.#toStorageError(error, operation, path);
  }

  scope(): MemoryFsDriver {
    return this;
  }

  async tidy(step: (io: MemoryFsDriver) => Promise<unknown>): Promise<void> {
    await step(this).catch(() => undefined);
  }

  lstat(path: FsPath): Promise<FsStats | undefined> {
    return this.#request(() => {
      const node = this.#find(path);
      return node === undefined ? undefined : this.#describe(node);
    });
  }

  readdir(path: FsPath, stopAfter: number): Promise<FsDirEntry[] | undefined> {
    return this.#request(() => {
      const key = this.#key(path);
      const node = this.#find(path);
      if (node === undefined || node.kind !== "directory") return undefined;
      const entries: FsDirEntry[] = [];
      const prefix = key === "" ? "" : `${key}/`;
      for (const [child, childNode] of this.#nodes) {
        if (child === "" || !child.startsWith(prefix) || child.slice(prefix.length).includes("/")) {
          continue;
        }
        entries.push({ name: child.slice(prefix.length), stats: this.#describe(childNode) });
        if (entries.length > stopAfter) break;
      }
      return entries;
    });
  }

  async makeRoot(): Promise<void> {}

  mkdir(path: string): Promise<void> {
    return this.#request(() => {
      this.#parentDirectory(path);
      if (this.#nodes.has(path)) throw fail("EEXIST", path);
      const directory: Node = { kind: "directory", mtimeMs: this.#tick() };
      this.#nodes.set(path, directory);
      this.#durable.set(directory, new Map());
    });
  }

  rmdir(path: FsPath): Promise<void> {
    return this.#request(() => {
      const key = this.#key(path);
      const node = this.#find(path);
      if (node === undefined) throw fail("ENOENT", path);
      if (node.kind !== "directory") throw fail("ENOTDIR", path);
      for (const other of this.#nodes.keys()) {
        if (other.startsWith(`${key}/`)) throw fail("ENOTEMPTY", path);
      }
      this.#nodes.delete(key);
    });
  }

  unlink(path: FsPath): Promise<void> {
    return this.#request(() => {
      const node = this.#find(path);
      if (node === undefined) throw fail("ENOENT", path);
      if (node.kind === "directory") throw fail("EISDIR", path);
      this.#nodes.delete(this.#key(path));
    });
  }

  createExclusive(path: string): Promise<number> {
    return this.#request(() => {
      this.#parentDirectory(path);
      if (this.#nodes.has(path)) throw fail("EEXIST", path);
      const mtimeMs = this.#tick();
      const empty = Buffer.alloc(0);
      const inode: Inode = {
        ino: this.#nextIno++,
        bytes: empty,
        mtimeMs,
        durable: empty,
        durableMtimeMs: mtimeMs,
      };
      this.#nodes.set(path, { kind: "file", inode });
      return this.#open(inode, true);
    });
  }

  openRead(path: string): Promise<number> {
    return this.#request(() => {
      const node = this.#find(path);
      if (node === undefined) throw fail("ENOENT", path);
      if (node.kind === "symlink") throw fail("ELOOP", path);
      if (node.kind !== "file") throw fail("EISDIR", path);
      return this.#open(node.inode, false);
    });
  }

  write(handle: number, bytes: Uint8Array, position: number): Promise<void> {
    // Copied now, as a kernel copies a write(2): the caller may reuse its buffer afterwards.
    const copy = Buffer.from(bytes);
    return this.#request(() => {
      const file = this.#handle(handle);
      if (!file.writable) throw fail("EBADF", String(handle));
      const { inode } = file;
      const end = position + copy.length;
      if (end > inode.bytes.length) {
        const grown = Buffer.alloc(end);
        inode.bytes.copy(grown);
        inode.bytes = grown;
      }
      copy.copy(inode.bytes, position);
      inode.mtimeMs = this.#tick();
    });
  }

  read(handle: number, into: Uint8Array, position: number): Promise<number> {
    return this.#request(() => {
      const { inode } = this.#handle(handle);
      if (position >= inode.bytes.length) return 0;
      return inode.bytes.copy(
        into,
        0,
        position,
        Math.min(inode.bytes.length, position + into.length),
      );
    });
  }

  fsync(handle: number): Promise<void> {
    return this.#request(() => {
      const { inode } = this.#handle(handle);
      inode.durable = Buffer.from(inode.bytes);
      inode.durableMtimeMs = inode.mtimeMs;
    });
  }

  fstat(handle: number): Promise<FsStats> {
    return this.#request(() => this.#describe({ kind: "file", inode: this.#handle(handle).inode }));
  }

  setMtime(handle: number, _stats: FsStats, mtimeMs: number): Promise<FsStats> {
    return this.#request(() => {
      const { inode } = this.#handle(handle);
      inode.mtimeMs = mtimeMs;
      return this.#describe({ kind: "file", inode });
    });
  }

  close(handle: number): Promise<void> {
    return this.#request(() => {
      this.#handle(handle);
      this.#handles.delete(handle);
    });
  }

  rename(from: string, to: string): Promise<void> {
    return this.#request(() => this.#move(from, to, true));
  }

  renameNoReplace(from: string, to: string): Promise<void> {
    return this.#request(() => this.#move(from, to, false));
  }

  link(from: string, to: string): Promise<void> {
    return this.#request(() => {
      const node = this.#find(from);
      if (node === undefined) throw fail("ENOENT", from);
      if (node.kind !== "file") throw fail("EPERM", from);
      this.#parentDirectory(to);
      if (this.#nodes.has(to)) throw fail("EEXIST", to);
      this.#nodes.set(to, node);
    });
  }

  symlink(target: string, path: string): Promise<void> {
    return this.#request(() => {
      this.#parentDirectory(path);
      if (this.#nodes.has(path)) throw fail("EEXIST", path);
      this.#nodes.set(path, { kind: "symlink", target });
    });
  }

  readlink(path: string): Promise<string> {
    return this.#request(() => {
      const node = this.#find(path);
      if (node === undefined) throw fail("ENOENT", path);
      if (node.kind !== "symlink" || node.target === undefined) throw fail("EINVAL", path);
      return node.target;
    });
  }

  syncDirectory(path: string): Promise<void> {
    return this.#request(() => {
      const node = this.#find(path);
      if (node?.kind === "directory") this.#durable.set(node, this.#children(path));
    });
  }

  #move(from: string, to: string, replace: boolean): void {
    const node = this.#find(from);
    if (node === undefined) throw fail("ENOENT", from);
    this.#parentDirectory(to);
    const target = this.#nodes.get(to);
    if (target !== undefined && (!replace || target.kind === "directory")) {
      throw fail(target.kind === "directory" ? "EISDIR" : "EEXIST", to);
    }
    this.#nodes.delete(from);
    this.#nodes.set(to, node);
  }

  /** The names directly in the directory at `path`, and what each links to. */
  #children(path: string): Map<string, Node> {
    const prefix = path === "" ? "" : `${path}/`;
    const children = new Map<string, Node>();
    for (const [child, node] of this.#nodes) {
      if (child === "" || !child.startsWith(prefix)) continue;
      const name = child.slice(prefix.length);
      if (!name.includes("/")) children.set(name, node);
    }
    return children;
  }

  /** Runs one request after a few turns of the event loop (in order, with `orderedRequests`). */
  #request<T>(body: () => T): Promise<T> {
    const turns = this.#nextRandom() % 4;
    const run = async () => {
      for (let turn = 0; turn < turns; turn++) await nextTurn();
      if (this.#dead) throw fail("EIO", "the power failed");
      return body();
    };
    if (!this.capabilities.orderedRequests) return run();
    const result = this.#queue.then(run);
    this.#queue = result.catch(() => undefined);
    return result;
  }

  #nextRandom(): number {
    // xorshift32: deterministic per seed, enough to vary interleavings.
    let x = this.#random;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.#random = x >>> 0;
    return this.#random;
  }

  #tick(): number {
    this.#clock += this.capabilities.coarseMtime ? 0 : 1;
    return this.#clock;
  }

  #key(path: FsPath): string {
    return typeof path === "string" ? path : Buffer.from(path).toString("utf8");
  }

  /** The node at `path`, if every ancestor is a directory. */
  #find(path: FsPath): Node | undefined {
    const key = this.#key(path);
    if (key !== "") {
      const slash = key.lastIndexOf("/");
      const parent = slash === -1 ? "" : key.slice(0, slash);
      if (this.#find(parent)?.kind !== "directory") return undefined;
    }
    return this.#nodes.get(key);
  }

  #parentDirectory(path: string): void {
    const slash = path.lastIndexOf("/");
    const parent = slash === -1 ? "" : path.slice(0, slash);
    const node = this.#find(parent);
    if (node === undefined) throw fail("ENOENT", path);
    if (node.kind !== "directory") throw fail("ENOTDIR", path);
  }

  #open(inode: Inode, writable: boolean): number {
    const handle = this.#nextHandle++;
    this.#handles.set(handle, { inode, writable });
    return handle;
  }

  #handle(handle: number): OpenFile {
    const file = this.#handles.get(handle);
    if (file === undefined) throw fail("EBADF", String(handle));
    return file;
  }

  #describe(node: Node): FsStats {
    if (node.kind !== "file") {
      const mtimeMs = node.kind === "directory" ? node.mtimeMs : 0;
      return { kind: node.kind, size: 0, mtimeMs, version: "", identity: node.kind };
    }
    const { inode } = node;
    // The local driver's format (mtime in microseconds), so a tree loaded from a real directory
    // keeps the version tokens it had there.
    const mtime = Math.round(inode.mtimeMs * 1000).toString(16);
    const version = `${inode.ino.toString(16)}-${inode.bytes.length.toString(16)}-${mtime}`;
    return {
      kind: "file",
      size: inode.bytes.length,
      mtimeMs: inode.mtimeMs,
      version: this.capabilities.coarseMtime
        ? `${inode.bytes.length.toString(16)}-${mtime}`
        : version,
      identity: version,
    };
  }
}
