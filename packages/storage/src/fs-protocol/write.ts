import { throwIfAborted } from "../adapter/abort.js";
import { versionMismatch } from "../adapter/backend-error.js";
import type { WriteData, WriteOptions, WriteResult } from "../backend.js";
import { mapBounded } from "../concurrency.js";
import type { StorageOperation } from "../errors.js";
import { tempFileName } from "../names.js";
import { copyInto } from "./copy.js";
import type { FsDriver, FsStats } from "./driver.js";
import { beside, type FsStore, type PathState, splitPath } from "./store.js";
import { withSwapLock } from "./swap-lock.js";

/** Directory flushes in flight at once; each waits on the disk, not on this process. */
const FLUSH_CONCURRENCY = 16;

/**
 * Streams `data` into a reserved temp name beside the target, flushes it (unless the store runs
 * without fsync and the write is not a `commit`) and moves it into place: an atomic rename
 * when overwriting, a hard link (or, without one, a rename that refuses an existing target) when
 * not, because a link fails atomically when the name exists and so can never clobber a file that
 * appeared after our check. A compare-and-swap (`ifMatch`) checks the target's version and
 * renames while holding the target's swap lock, so of two swaps of one version exactly one wins.
 * On failure the temp file is removed, and so are the directories the store's writes made that
 * received no output once the last write below them ends.
 */
export async function writeAtomically<Handle>(
  store: FsStore<Handle>,
  path: string,
  data: WriteData,
  options: WriteOptions,
  operation: StorageOperation,
): Promise<WriteResult> {
  // The temp file's handle lives on one channel; the whole write stays there.
  const io = store.driver.scope(options.signal, true);
  // Counted in before anything waits: see `FsStore.leaveDirectories`.
  const directories = store.enterDirectories(path);
  try {
    // A directory abandoned before this write counted in may still be on its way out.
    await store.removals();
    const result = await writeInPlace(store, io, path, data, options, operation);
    store.keepDirectories(directories);
    return result;
  } finally {
    await io.tidy(() => store.leaveDirectories(directories));
  }
}

async function writeInPlace<Handle>(
  store: FsStore<Handle>,
  io: FsDriver<Handle>,
  path: string,
  data: WriteData,
  options: WriteOptions,
  operation: StorageOperation,
): Promise<WriteResult> {
  const { signal, ifMatch } = options;
  const capabilities = store.driver.capabilities;
  const overwrite = ifMatch !== undefined || (options.overwrite ?? false);
  if (overwrite && !capabilities.atomicReplace) {
    const detail = `${store.driver.lacks("atomicReplace")}, which atomic replacement needs`;
    throw store.error("unsupported", operation, path, detail);
  }
  const state = await store.inspect(io, path, operation);
  if (ifMatch !== undefined) checkVersion(store, state, ifMatch, operation, path);
  switch (state.kind) {
    case "blocked":
      throw store.error("conflict", operation, path, `"${state.at}" is a file, not a directory`);
    case "directory":
      throw store.error("unsupported", operation, path, "is a directory");
    case "other":
      throw store.error("unsupported", operation, path, "is not a regular file");
    case "file":
      if (!overwrite) throw store.error("already_exists", operation, path);
      break;
    case "missing":
      break;
  }
  const existing = state.kind === "missing" ? state.existing : path.split("/").length - 1;
  throwIfAborted(signal);
  const created = await createParents(store, io, path, existing, operation);
  const { parent, name } = splitPath(path);
  const temp = beside(parent, tempFileName(name));
  const commit = options.commit === true;
  let tempExists = false;
  let stats: FsStats;
  try {
    const handle = await openExclusive(store, io, temp, path, parent, created, operation);
    tempExists = true;
    let closed = false;
    const close = () => {
      closed = true;
      return io.close(handle);
    };
    try {
      await copyInto(store, io, handle, data, signal, operation, path);
      // A commit is flushed even when the store runs without fsync.
      const flush = (store.fsync || commit) && capabilities.fileSync;
      const flushed = flush ? io.fsync(handle) : Promise.resolve();
      const described = io.fstat(handle);
      // Awaited below; until then a failure of one must not surface as an unhandled rejection.
      flushed.catch(() => undefined);
      described.catch(() => undefined);
      if (overwrite) {
        await flushed;
        stats = await described;
        throwIfAborted(signal);
        if (commit) await flushBeforeCommit(store, io, created);
        const replace = async (release?: () => Promise<void>) => {
          stats = await prepareReplace(store, io, handle, stats, path, ifMatch, operation);
          await close();
          const renamed = io.rename(temp, path);
          // In order, the swap lock's release follows the rename in the same round trip: a cut
          // once the rename is done can hardly leave the lock behind it.
          const releasing = capabilities.orderedRequests ? release?.() : undefined;
          try {
            await renamed;
            tempExists = false;
          } finally {
            await releasing;
          }
        };
        if (ifMatch === undefined) await replace();
        else await withSwapLock(store, parent, name, replace, { signal });
      } else {
        // In order, the close may go out behind the flush: one round trip, not two.
        const closing = capabilities.orderedRequests ? close() : undefined;
        await Promise.all([flushed, closing]);
        stats = await described;
        if (!closed) await close();
        throwIfAborted(signal);
        if (commit) await flushBeforeCommit(store, io, created);
        // The link step removes the temp name whatever its outcome.
        tempExists = false;
        await linkNoClobber(store, io, temp, path, operation);
      }
    } finally {
      if (!closed) await io.tidy((clean) => clean.close(handle));
    }
  } finally {
    if (tempExists) await io.tidy((clean) => clean.unlink(temp));
  }
  await afterCommit(store, io, parent, created, commit);
  return { version: stats.version };
}

/**
 * Opens the temp file exclusively; when a concurrent run pruned the (empty) directory after it
 * was verified, the directory is checked and made again, once.
 */
async function openExclusive<Handle>(
  store: FsStore<Handle>,
  io: FsDriver<Handle>,
  temp: string,
  path: string,
  parent: string,
  created: string[],
  operation: StorageOperation,
): Promise<Handle> {
  try {
    return await io.createExclusive(temp);
  } catch (error) {
    if (io.classify(error) !== "not_found" || parent === "") throw error;
    store.forget(parent);
    const state = await store.inspect(io, parent, operation);
    if (state.kind !== "directory") {
      const existing = state.kind === "missing" ? state.existing : 0;
      created.push(...(await createParents(store, io, path, existing, operation)));
    }
    return io.createExclusive(temp);
  }
}

/**
 * Creates the missing parents of `path` one level at a time, so each new level is checked, not
 * followed; the root (trusted configuration) is made with its own parents. Returns what it made,
 * recorded (`FsStore.markMade`) for the write to remove if nothing lands there.
 */
export async function createParents<Handle>(
  store: FsStore<Handle>,
  io: FsDriver<Handle>,
  path: string,
  existing: number,
  operation: StorageOperation,
): Promise<string[]> {
  const segments = path.split("/");
  const created: string[] = [];
  if (existing === 0) await io.makeRoot();
  for (let index = existing; index < segments.length - 1; index++) {
    const partial = segments.slice(0, index + 1).join("/");
    try {
      await io.mkdir(partial);
      created.push(partial);
      store.markMade(partial);
    } catch (error) {
      // Someone else created it meanwhile (some stores name that only a generic failure): accept
      // only a real directory.
      const stats = await io.lstat(partial);
      if (stats === undefined) {
        if (io.classify(error) === "not_directory") {
          throw store.error("conflict", operation, path, "a parent is not a directory", error);
        }
        throw error;
      }
      if (stats.kind === "symlink") throw store.symlinkRefused(operation, path, partial);
      if (stats.kind !== "directory") {
        throw store.error("conflict", operation, path, `"${partial}" is a file, not a directory`);
      }
    }
    store.markVerified(partial);
  }
  return created;
}

/**
 * Before a replace: re-checks `ifMatch` against the target as it is now and refuses a symlink
 * there. Where mtimes are coarse, gives the new file an mtime past the one it replaces, so a file
 * replaced within the tick by one of the same size still gets a new version token.
 */
async function prepareReplace<Handle>(
  store: FsStore<Handle>,
  io: FsDriver<Handle>,
  handle: Handle,
  stats: FsStats,
  path: string,
  ifMatch: string | undefined,
  operation: StorageOperation,
): Promise<FsStats> {
  const current = await io.lstat(path);
  const currentFile = current?.kind === "file" ? current : undefined;
  if (ifMatch !== undefined && currentFile?.version !== ifMatch) {
    throw store.error("conflict", operation, path, versionMismatch(ifMatch, currentFile?.version));
  }
  if (current?.kind === "symlink") throw store.symlinkRefused(operation, path, path);
  if (!store.driver.capabilities.coarseMtime) return stats;
  if (currentFile === undefined || stats.mtimeMs > currentFile.mtimeMs) return stats;
  return io.setMtime(handle, stats, currentFile.mtimeMs + 1000);
}

/**
 * Gives the finished temp file the name `path` without ever replacing what is there, and removes
 * the temp name whatever the outcome. Where the store moves without clobbering in one request,
 * that move does it all; otherwise a hard link (or, lacking one, the rename that refuses an
 * existing target) and an unlink behind it. Where requests run in order both go out together.
 */
async function linkNoClobber<Handle>(
  store: FsStore<Handle>,
  io: FsDriver<Handle>,
  temp: string,
  path: string,
  operation: StorageOperation,
): Promise<void> {
  const { hardLink, atomicMoveNoClobber, orderedRequests } = store.driver.capabilities;
  const link = hardLink && !atomicMoveNoClobber;
  const linked = link ? io.link(temp, path) : io.renameNoReplace(temp, path);
  linked.catch(() => undefined);
  // After a rename that worked the name is gone already: the unlink fails, which is fine.
  const removeTemp = () => io.tidy((clean) => clean.unlink(temp));
  // A move done in one request leaves no temp name behind when it worked; only a refused one
  // needs the unlink.
  const removed = orderedRequests && !atomicMoveNoClobber ? removeTemp() : undefined;
  try {
    await linked;
  } catch (error) {
    await (removed ?? removeTemp());
    if (io.classify(error) === "exists" || (await io.lstat(path).catch(() => undefined))) {
      throw store.error("already_exists", operation, path, undefined, error);
    }
    if (link && io.classify(error) === "unsupported") {
      const detail = `${store.driver.lacks("hardLink")}, which no-clobber writes need`;
      throw store.error("unsupported", operation, path, detail, error);
    }
    throw error;
  }
  if (!atomicMoveNoClobber) await (removed ?? removeTemp());
}

function checkVersion<Handle>(
  store: FsStore<Handle>,
  state: PathState,
  expected: string,
  operation: StorageOperation,
  path: string,
): void {
  const current = state.kind === "file" ? state.stats.version : undefined;
  if (current !== expected) {
    throw store.error("conflict", operation, path, versionMismatch(expected, current));
  }
}

/**
 * Everything a commit file will describe must be durable before it is: the directories this
 * write made, and (in fsync mode) every directory other writes moved names into.
 */
function flushBeforeCommit<Handle>(
  store: FsStore<Handle>,
  io: FsDriver<Handle>,
  created: readonly string[],
): Promise<void> {
  return flushDirectories(
    store,
    io,
    created.map((made) => splitPath(made).parent),
  );
}

/**
 * Flushes `own` and every directory `store.unflushed` holds (in fsync mode, each one other writes
 * and deletes changed names in), where the store can: what a commit needs durable before it.
 */
export async function flushDirectories<Handle>(
  store: FsStore<Handle>,
  io: FsDriver<Handle>,
  own: readonly string[],
): Promise<void> {
  if (!store.driver.capabilities.directorySync) return;
  const directories = [...store.unflushed, ...own];
  await mapBounded([...new Set(directories)], FLUSH_CONCURRENCY, async (directory) => {
    // Forgotten before the flush, not after: a name moved in while it runs marks it again.
    store.unflushed.delete(directory);
    try {
      await io.syncDirectory(directory);
    } catch (error) {
      store.unflushed.add(directory);
      throw error;
    }
  });
}

/**
 * After the name is in place: a commit file's directory is flushed at once; other writes'
 * directories wait for the next commit (without fsync only those holding directories they made).
 */
async function afterCommit<Handle>(
  store: FsStore<Handle>,
  io: FsDriver<Handle>,
  parent: string,
  created: readonly string[],
  commit: boolean,
): Promise<void> {
  if (!store.driver.capabilities.directorySync) return;
  if (commit) await io.syncDirectory(parent);
  else store.namesAdded(parent, created);
}
