import type { StorageOperation } from "@distributor/storage";
import type { Attributes, FileEntryWithStats, SFTPWrapper } from "ssh2";
import { hasStatus, STATUS, sshError } from "./errors.js";
import { Cancellation, type Session } from "./session.js";

/** How long a cancelled operation still waits for its clean-up (see `Remote.cleanUp`). */
const CLEANUP_GRACE_MS = 2_000;

const S_IFMT = 0o170000;
const S_IFDIR = 0o040000;
const S_IFREG = 0o100000;
const S_IFLNK = 0o120000;

export type RemoteKind = "file" | "directory" | "symlink" | "other";

export function kindOf(attrs: Attributes): RemoteKind {
  switch (attrs.mode & S_IFMT) {
    case S_IFREG:
      return "file";
    case S_IFDIR:
      return "directory";
    case S_IFLNK:
      return "symlink";
    default:
      return "other";
  }
}

/**
 * Version token of a remote file. SFTP v3 attributes carry no inode and whole-second mtimes, so
 * the token is size and mtime; writes through this backend make it unique per path by giving
 * every replacement an mtime past the one it replaces (see `write.ts`).
 */
export function remoteVersion(attrs: Attributes): string {
  return `${attrs.size.toString(16)}-${attrs.mtime.toString(16)}`;
}

/** What lies at a logical path, found without following any symlink below the root. */
export type PathState =
  | { kind: "missing"; existing: number }
  | { kind: "blocked"; at: string }
  | { kind: "file"; attrs: Attributes }
  | { kind: "directory"; attrs: Attributes }
  | { kind: "other"; attrs: Attributes };

/**
 * The remote side of one backend: its root, its session, and the directories below the root it
 * has already seen to be real directories (not symlinks). The cache lives as long as the backend,
 * which distributor opens per run, so a publish checks each directory once instead of once per
 * path segment of every file.
 */
interface SharedState {
  rootReady: boolean;
  /** Directories (logical) with writes of this backend in flight below them, and how many. */
  readonly writing: Map<string, number>;
  /** Directories those writes made and no output of theirs lies below yet. */
  readonly made: Set<string>;
  /** The removals of abandoned directories, one after another (see `leaveDirectories`). */
  removing: Promise<void>;
  /** Bumped by every `forget`: an lstat answered across one does not mark anything verified. */
  epoch: number;
}

/**
 * A view of the remote for one operation: which channel its requests go to (`onLane`) and which
 * abort signal they honour (`forOperation`); every view shares the caches and bookkeeping.
 */
export class Remote {
  readonly #verified: Set<string>;
  readonly #shared: SharedState;
  readonly #lane: number | undefined;
  readonly #cancel: Cancellation | undefined;

  constructor(
    readonly session: Session,
    readonly root: string,
    shared?: {
      verified: Set<string>;
      state: SharedState;
      lane: number | undefined;
      cancel: Cancellation | undefined;
    },
  ) {
    this.#verified = shared?.verified ?? new Set();
    this.#shared = shared?.state ?? {
      rootReady: false,
      writing: new Map(),
      made: new Set(),
      removing: Promise.resolve(),
      epoch: 0,
    };
    this.#lane = shared?.lane;
    this.#cancel = shared?.cancel;
  }

  /**
   * The same remote with every request bound to `signal`: when it fires, requests in flight and
   * waiting for a slot reject with its reason at once (see `tidy` for requests that must go out
   * anyway).
   */
  forOperation(signal: AbortSignal | undefined): Remote {
    return new Remote(this.session, this.root, {
      verified: this.#verified,
      state: this.#shared,
      lane: this.#lane,
      cancel: signal === undefined ? undefined : new Cancellation(signal),
    });
  }

  /** The abort signal this view's requests honour. */
  get signal(): AbortSignal | undefined {
    return this.#cancel?.signal;
  }

  /**
   * Counts a write in on every directory above `path` below the root; returns them. See
   * `leaveDirectories`.
   */
  enterDirectories(path: string): string[] {
    const directories: string[] = [];
    for (let end = path.indexOf("/"); end !== -1; end = path.indexOf("/", end + 1)) {
      const directory = path.slice(0, end);
      this.#shared.writing.set(directory, (this.#shared.writing.get(directory) ?? 0) + 1);
      directories.push(directory);
    }
    return directories;
  }

  /** Records a directory a write made. */
  markMade(directory: string): void {
    this.#shared.made.add(directory);
  }

  /** A write put an output below these directories: none of them is to be removed. */
  keepDirectories(directories: readonly string[]): void {
    for (const directory of directories) this.#shared.made.delete(directory);
  }

  /**
   * Counts a write out again and removes, deepest first, the directories writes made that no
   * write is in flight below any more and that received no output: they are empty unless
   * another client put something there (`rmdir` refuses a directory that is not empty). A write
   * that fails after making a directory cannot remove it while other writes' temp files are
   * inside; this way the last one out does. The directories are forgotten at once, and removed
   * after every removal asked for before, so a parent never goes before its children; a write
   * waits for pending removals (`removals`) before it looks at its directories.
   */
  leaveDirectories(directories: readonly string[]): Promise<void> {
    const abandoned: string[] = [];
    for (let index = directories.length - 1; index >= 0; index--) {
      const directory = directories[index] as string;
      const left = (this.#shared.writing.get(directory) ?? 1) - 1;
      if (left > 0) {
        this.#shared.writing.set(directory, left);
        continue;
      }
      this.#shared.writing.delete(directory);
      if (this.#shared.made.delete(directory)) {
        this.forget(directory);
        abandoned.push(directory);
      }
    }
    if (abandoned.length === 0) return Promise.resolve();
    const removal = this.#shared.removing.then(async () => {
      for (const directory of abandoned) {
        // Best effort: another client may have put something in it. Not bound to the signal:
        // a cancelled write still leaves no empty directory behind.
        await this.session
          .request((sftp, done) => sftp.rmdir(this.path(directory), done), this.#lane)
          .catch(() => undefined);
      }
    });
    this.#shared.removing = removal;
    return removal;
  }

  /** Settles once every removal of abandoned directories asked for so far is done. */
  removals(): Promise<void> {
    return this.#shared.removing;
  }

  /** Set once the root is known to exist as a directory (it is created on first write). */
  get rootReady(): boolean {
    return this.#shared.rootReady;
  }

  set rootReady(ready: boolean) {
    this.#shared.rootReady = ready;
  }

  /**
   * The same remote with every request on one channel, for an operation holding a handle (a
   * handle is only valid on the channel that opened it).
   */
  onLane(): Remote {
    return new Remote(this.session, this.root, {
      verified: this.#verified,
      state: this.#shared,
      lane: this.session.lane(),
      cancel: this.#cancel,
    });
  }

  /** Remote path of a logical path or prefix. */
  path(logical: string): string {
    if (logical === "") return this.root;
    return this.root === "/" ? `/${logical}` : `${this.root}/${logical}`;
  }

  call<T>(send: (sftp: SFTPWrapper, done: (error: unknown, value?: T) => void) => void) {
    return this.session.request<T>(send, this.#lane, this.#cancel);
  }

  /**
   * A request that must go out even when the operation was cancelled: closing a handle,
   * removing a temp file, releasing a lock. Its failure is ignored; see `cleanUp` for how long a
   * cancelled operation waits for it.
   */
  tidy(send: (sftp: SFTPWrapper, done: (error: unknown) => void) => void): Promise<void> {
    return this.cleanUp(
      this.session.request(send, this.#lane).then(
        () => undefined,
        () => undefined,
      ),
    );
  }

  /**
   * Waits for clean-up work, but once the operation is cancelled at most `CLEANUP_GRACE_MS`
   * more: a cancelled operation leaves nothing behind on a server that answers, and a server
   * that stopped answering does not hold up the caller that gave up.
   */
  async cleanUp(work: Promise<void>): Promise<void> {
    const cancel = this.#cancel;
    if (cancel === undefined) return work;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let stopWatching: (() => void) | undefined;
    const grace = new Promise<void>((resolve) => {
      // One grace period per operation, from the first clean-up that saw the cancellation.
      const start = () => {
        cancel.cleanUpDeadline ??= Date.now() + CLEANUP_GRACE_MS;
        timer = setTimeout(resolve, Math.max(0, cancel.cleanUpDeadline - Date.now()));
      };
      if (cancel.signal.aborted) start();
      else stopWatching = cancel.watch(start);
    });
    try {
      await Promise.race([work, grace]);
    } finally {
      clearTimeout(timer);
      stopWatching?.();
    }
  }

  /** lstat of a logical path, or undefined when it does not exist. */
  async lstat(logical: string): Promise<Attributes | undefined> {
    try {
      return await this.call<Attributes>((sftp, done) => sftp.lstat(this.path(logical), done));
    } catch (error) {
      if (hasStatus(error, STATUS.NO_SUCH_FILE)) return undefined;
      throw error;
    }
  }

  markVerified(directory: string): void {
    this.#verified.add(directory);
  }

  /** Forgets a directory (and everything below it) once it has been removed. */
  forget(directory: string): void {
    this.#shared.epoch++;
    if (directory === "") {
      this.#verified.clear();
      return;
    }
    for (const known of this.#verified) {
      if (known === directory || known.startsWith(`${directory}/`)) this.#verified.delete(known);
    }
  }

  /**
   * Lstats the path and each ancestor not yet verified, all at once, then reads the answers from
   * the root down: a symlink anywhere below the root is refused (`unsupported`), never followed.
   * The root itself is trusted operator configuration.
   */
  async inspect(logical: string, operation: StorageOperation): Promise<PathState> {
    const segments = logical.split("/");
    const partials = segments.map((_, index) => segments.slice(0, index + 1).join("/"));
    const epoch = this.#shared.epoch;
    const remember = (directory: string) => {
      if (this.#shared.epoch === epoch) this.#verified.add(directory);
    };
    const answers = await Promise.all(
      partials.map((partial, index) =>
        index < partials.length - 1 && this.#verified.has(partial)
          ? Promise.resolve<Attributes | "verified" | undefined>("verified")
          : // Below a file OpenSSH answers "no such file" (ENOTDIR), read as missing here.
            this.lstat(partial),
      ),
    );
    for (let index = 0; index < partials.length; index++) {
      const partial = partials[index] as string;
      const attrs = answers[index];
      if (attrs === "verified") continue;
      if (attrs === undefined) return { kind: "missing", existing: index };
      const kind = kindOf(attrs);
      if (kind === "symlink") throw symlinkRefused(operation, logical, partial);
      const last = index === partials.length - 1;
      if (!last) {
        if (kind !== "directory") return { kind: "blocked", at: partial };
        remember(partial);
        continue;
      }
      if (kind === "file") return { kind: "file", attrs };
      if (kind === "directory") {
        remember(partial);
        return { kind: "directory", attrs };
      }
      return { kind: "other", attrs };
    }
    return { kind: "missing", existing: 0 };
  }
}

export function symlinkRefused(operation: StorageOperation, path: string, symlinkPath: string) {
  return sshError(
    "unsupported",
    operation,
    path,
    `"${symlinkPath}" is a symlink; symlinks are refused`,
  );
}

export type { FileEntryWithStats };
