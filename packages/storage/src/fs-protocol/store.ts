import { type BackendErrorFactory, backendErrors } from "../adapter/backend-error.js";
import type { StorageError, StorageOperation } from "../errors.js";
import type { FsDriver, FsStats } from "./driver.js";

/** What lies at a logical path, found without following any symlink below the root. */
export type PathState =
  /** The first `existing` segments are directories; the next one does not exist. */
  | { kind: "missing"; existing: number }
  /** An ancestor (`at`, logical) is not a directory, so the path cannot exist. */
  | { kind: "blocked"; at: string }
  | { kind: "file"; stats: FsStats }
  | { kind: "directory"; stats: FsStats }
  /** A FIFO, socket or device: never read, written or deleted. */
  | { kind: "other"; stats: FsStats };

export interface FsStoreOptions {
  /**
   * Flush every written file before moving it into place (default true). With false only writes
   * marked `commit` (the state, the lease) are flushed, with their directory where the store can.
   */
  fsync?: boolean;
}

/**
 * One filesystem-like store: a driver and what the protocol keeps about it for the backend's
 * lifetime: the directories seen to be real, the directories writes made, the directories whose
 * new entries are not flushed yet. The protocol's steps (`write.ts`, `swap-lock.ts`,
 * `remove.ts`, `walk.ts`) all work through one.
 */
export class FsStore<Handle = unknown> {
  readonly error: BackendErrorFactory;
  readonly fsync: boolean;
  /** Directories (logical) seen to be real directories; only with `rememberDirectories`. */
  readonly #verified = new Set<string>();
  /** Bumped by every `forget`: an lstat answered across one marks nothing verified. */
  #epoch = 0;
  /** Directories (logical) with writes in flight below them, and how many. */
  readonly #writing = new Map<string, number>();
  /** Directories those writes made and no output of theirs lies below yet. */
  readonly #made = new Set<string>();
  /** Removals of abandoned directories, one after another (see `leaveDirectories`). */
  #removing: Promise<void> = Promise.resolve();
  /**
   * Directories whose new entries are not flushed yet (with `directorySync`): a commit flushes
   * them first, so the state never records a name a power cut could still lose. In fsync mode
   * every directory a write moved a name into; without fsync only the parents of directories
   * writes made, since a commit may name a directory (a release) as a whole.
   */
  readonly unflushed = new Set<string>();

  /** A write moved a name into `parent` and made `created` on its way (see `unflushed`). */
  namesAdded(parent: string, created: readonly string[]): void {
    if (!this.driver.capabilities.directorySync) return;
    if (this.fsync) this.unflushed.add(parent);
    for (const made of created) this.unflushed.add(splitPath(made).parent);
  }

  /**
   * Names changed in these directories (entries removed) that no flush covers yet: in fsync
   * mode the next commit flushes them first, so it never lands before what it commits.
   */
  changedNames(directories: readonly string[]): void {
    if (!this.fsync || !this.driver.capabilities.directorySync) return;
    for (const directory of directories) this.unflushed.add(directory);
  }

  constructor(
    readonly driver: FsDriver<Handle>,
    options: FsStoreOptions = {},
  ) {
    this.error = backendErrors(driver.name);
    this.fsync = options.fsync ?? true;
  }

  symlinkRefused(operation: StorageOperation, path: string, symlinkPath: string): StorageError {
    return this.error(
      "unsupported",
      operation,
      path,
      `"${symlinkPath}" is a symlink; symlinks are refused`,
    );
  }

  /**
   * Lstats the path and each ancestor not known to be a directory, all at once, then reads the
   * answers from the root down: a symlink anywhere below the root is refused (`unsupported`),
   * never followed. The root itself is trusted operator configuration. Checking then acting is
   * not atomic; renames and unlinks never follow a final symlink, and reads confirm the kind of
   * what they opened.
   */
  async inspect(
    io: FsDriver<Handle>,
    logical: string,
    operation: StorageOperation,
  ): Promise<PathState> {
    return this.#inspectSegments(io, logical, operation, logical.split("/"));
  }

  /** Whether the parent of `logical` is a real directory, checked as `inspect` checks. */
  async parentIsDirectory(
    io: FsDriver<Handle>,
    logical: string,
    operation: StorageOperation,
  ): Promise<boolean> {
    const segments = logical.split("/");
    if (segments.length === 1) return true;
    const parent = await this.#inspectSegments(io, logical, operation, segments.slice(0, -1));
    return parent.kind === "directory";
  }

  async #inspectSegments(
    io: FsDriver<Handle>,
    logical: string,
    operation: StorageOperation,
    segments: readonly string[],
  ): Promise<PathState> {
    const remember = this.driver.capabilities.rememberDirectories;
    const partials: string[] = [];
    for (const segment of segments) {
      const previous = partials[partials.length - 1];
      partials.push(previous === undefined ? segment : `${previous}/${segment}`);
    }
    const epoch = this.#epoch;
    const answers = await Promise.all(
      partials.map((partial, index) =>
        remember && index < partials.length - 1 && this.#verified.has(partial)
          ? ("verified" as const)
          : io.lstat(partial),
      ),
    );
    for (let index = 0; index < partials.length; index++) {
      const partial = partials[index] as string;
      const stats = answers[index];
      if (stats === "verified") continue;
      if (stats === undefined) return { kind: "missing", existing: index };
      if (stats.kind === "symlink") throw this.symlinkRefused(operation, logical, partial);
      const last = index === partials.length - 1;
      if (!last && stats.kind !== "directory") return { kind: "blocked", at: partial };
      if (stats.kind === "directory" && remember && this.#epoch === epoch) {
        this.#verified.add(partial);
      }
      if (last) {
        if (stats.kind === "file") return { kind: "file", stats };
        if (stats.kind === "directory") return { kind: "directory", stats };
        return { kind: "other", stats };
      }
    }
    // Unreachable: a validated logical path has at least one segment.
    return { kind: "missing", existing: 0 };
  }

  /** Records a directory a listing or a write showed to be real. */
  markVerified(directory: string): void {
    if (this.driver.capabilities.rememberDirectories) this.#verified.add(directory);
  }

  /** Forgets a directory (and everything below it) once it has been removed. */
  forget(directory: string): void {
    this.#epoch++;
    if (directory === "") {
      this.#verified.clear();
      return;
    }
    for (const known of this.#verified) {
      if (known === directory || known.startsWith(`${directory}/`)) this.#verified.delete(known);
    }
  }

  /**
   * Counts a write in on every directory above `path` below the root; returns them. Registered
   * before the write waits on anything, so no other write removes a directory it is about to
   * use; see `leaveDirectories`.
   */
  enterDirectories(path: string): string[] {
    const directories: string[] = [];
    for (let end = path.indexOf("/"); end !== -1; end = path.indexOf("/", end + 1)) {
      const directory = path.slice(0, end);
      this.#writing.set(directory, (this.#writing.get(directory) ?? 0) + 1);
      directories.push(directory);
    }
    return directories;
  }

  /** Records a directory a write made. */
  markMade(directory: string): void {
    this.#made.add(directory);
  }

  /** A write put an output below these directories: none of them is to be removed. */
  keepDirectories(directories: readonly string[]): void {
    for (const directory of directories) this.#made.delete(directory);
  }

  /**
   * Counts a write out again and removes, deepest first, the directories writes made that no
   * write is in flight below any more and that received no output: a write that fails after
   * making a directory (an abort, a source that changed) cannot remove it while other writes'
   * temp files are inside, and when every write in it failed no output is left for the publish's
   * clean-up to prune it with. `rmdir` removes only empty directories, so nothing another client
   * put there is touched. The directories are forgotten at once and removed after every removal
   * asked for before, so a parent never goes before its children; a write waits for pending
   * removals (`removals`) before it looks at its directories.
   */
  leaveDirectories(directories: readonly string[]): Promise<void> {
    const abandoned: string[] = [];
    for (let index = directories.length - 1; index >= 0; index--) {
      const directory = directories[index] as string;
      const left = (this.#writing.get(directory) ?? 1) - 1;
      if (left > 0) {
        this.#writing.set(directory, left);
        continue;
      }
      this.#writing.delete(directory);
      if (this.#made.delete(directory)) {
        this.forget(directory);
        abandoned.push(directory);
      }
    }
    if (abandoned.length === 0) return Promise.resolve();
    const removal = this.#removing.then(async () => {
      for (const directory of abandoned) {
        // Not bound to any signal: a cancelled write still leaves no empty directory behind.
        await this.driver.tidy((io) => io.rmdir(directory));
      }
    });
    this.#removing = removal;
    return removal;
  }

  /** Settles once every removal of abandoned directories asked for so far is done. */
  removals(): Promise<void> {
    return this.#removing;
  }
}

/** The parent of a logical path (`""` at the root) and its last segment. */
export function splitPath(path: string): { parent: string; name: string } {
  const slash = path.lastIndexOf("/");
  return slash === -1
    ? { parent: "", name: path }
    : { parent: path.slice(0, slash), name: path.slice(slash + 1) };
}

/** `name` in the logical directory `parent`. */
export function beside(parent: string, name: string): string {
  return parent === "" ? name : `${parent}/${name}`;
}
