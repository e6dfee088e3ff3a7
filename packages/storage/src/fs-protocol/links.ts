import { throwIfAborted } from "../adapter/abort.js";
import type { OperationOptions } from "../backend.js";
import { tempFileName } from "../names.js";
import type { FsDriver } from "./driver.js";
import type { FsStore } from "./store.js";
import { beside, splitPath } from "./store.js";
import { createParents } from "./write.js";

// Symbolic and hard links over a filesystem-like store: what a release layout is built from
// (`StorageBackend.links`). Everything else in the protocol refuses symlinks below the root;
// these three touch only the one name they are given and never follow it.

/** The text of the symlink at `path`; undefined when nothing is there. */
export async function readSymlink<Handle>(
  store: FsStore<Handle>,
  path: string,
  options: OperationOptions,
): Promise<string | undefined> {
  const io = store.driver.scope(options.signal);
  const { parent } = splitPath(path);
  if (parent !== "") {
    const state = await store.inspect(io, parent, "read link");
    if (state.kind === "missing" || state.kind === "blocked") return undefined;
    if (state.kind !== "directory") {
      throw store.error("conflict", "read link", path, `"${parent}" is not a directory`);
    }
  }
  const stats = await io.lstat(path);
  if (stats === undefined) return undefined;
  if (stats.kind !== "symlink") {
    throw store.error("conflict", "read link", path, `is a ${stats.kind}, not a symlink`);
  }
  return io.readlink(path);
}

/**
 * Points the symlink at `path` to `target` in one step readers cannot see half of: a new link
 * under a temp name beside it, renamed over the old one. Anything but a symlink at `path` is
 * refused. The directory is flushed afterwards where the store can, whatever the fsync mode: the
 * switch is a commit.
 */
export async function switchSymlink<Handle>(
  store: FsStore<Handle>,
  path: string,
  target: string,
  options: OperationOptions,
): Promise<void> {
  const io = store.driver.scope(options.signal, true);
  const capabilities = store.driver.capabilities;
  if (!capabilities.atomicReplace) {
    const detail = `${store.driver.lacks("atomicReplace")}, which switching a link needs`;
    throw store.error("unsupported", "switch link", path, detail);
  }
  const { parent, name } = splitPath(path);
  let existing = path.split("/").length - 1;
  if (parent !== "") {
    const state = await store.inspect(io, parent, "switch link");
    if (state.kind === "blocked") {
      throw store.error("conflict", "switch link", path, `"${state.at}" is not a directory`);
    }
    if (state.kind === "file" || state.kind === "other") {
      throw store.error("conflict", "switch link", path, `"${parent}" is not a directory`);
    }
    if (state.kind === "missing") existing = state.existing;
  }
  const current = await io.lstat(path);
  if (current !== undefined && current.kind !== "symlink") {
    throw store.error("conflict", "switch link", path, `is a ${current.kind}, not a symlink`);
  }
  throwIfAborted(options.signal);
  await createParents(store, io, path, existing, "switch link");
  const temp = beside(parent, tempFileName(name));
  await io.symlink(target, temp);
  try {
    // SFTP servers disagree on the order of SYMLINK's two arguments (OpenSSH reverses the
    // draft's); the client guesses from the server's name. A link made the wrong way round is
    // caught here, before it could replace anything.
    const made = await io.readlink(temp);
    if (made !== target) {
      throw store.error(
        "unsupported",
        "switch link",
        path,
        `the server made a link to "${made}" when asked for "${target}" (it orders SYMLINK's arguments otherwise than its name suggests)`,
      );
    }
    await io.rename(temp, path);
  } catch (error) {
    await io.tidy((clean) => clean.unlink(temp));
    throw error;
  }
  if (capabilities.directorySync) await io.syncDirectory(parent);
}

/**
 * Gives the file at `from` the second name `to`, making `to`'s missing parents; an existing `to`
 * fails `already_exists`. The new name's directory is flushed with the next commit (fsync mode).
 */
export async function hardLinkFile<Handle>(
  store: FsStore<Handle>,
  from: string,
  to: string,
  options: OperationOptions,
): Promise<void> {
  if (!store.driver.capabilities.hardLink) {
    const detail = `${store.driver.lacks("hardLink")}, which sharing a file between releases needs`;
    throw store.error("unsupported", "hard link", to, detail);
  }
  const io = store.driver.scope(options.signal);
  // Counted in like a write (`FsStore.leaveDirectories`): no failing write removes a directory
  // this link is about to use.
  const directories = store.enterDirectories(to);
  try {
    await store.removals();
    await linkInPlace(store, io, from, to, options);
    store.keepDirectories(directories);
  } finally {
    await io.tidy(() => store.leaveDirectories(directories));
  }
}

/**
 * Makes `to` a clone of the file at `from` (see `LinkOperations.cloneFile`), making `to`'s missing
 * parents; an existing `to` fails `already_exists`, a filesystem without clones `unsupported`.
 */
export async function cloneFileInStore<Handle>(
  store: FsStore<Handle>,
  from: string,
  to: string,
  options: OperationOptions,
): Promise<void> {
  const io = store.driver.scope(options.signal);
  if (io.clone === undefined) {
    throw store.error("unsupported", "clone file", to, "the store cannot clone files");
  }
  const directories = store.enterDirectories(to);
  try {
    await store.removals();
    await linkInPlace(store, io, from, to, options, "clone file");
    store.keepDirectories(directories);
  } finally {
    await io.tidy(() => store.leaveDirectories(directories));
  }
}

async function linkInPlace<Handle>(
  store: FsStore<Handle>,
  io: FsDriver<Handle>,
  from: string,
  to: string,
  options: OperationOptions,
  operation: "hard link" | "clone file" = "hard link",
): Promise<void> {
  const [source, target] = await Promise.all([
    store.inspect(io, from, operation),
    store.inspect(io, to, operation),
  ]);
  if (source.kind !== "file") {
    if (source.kind === "missing" || source.kind === "blocked") {
      throw store.error("not_found", operation, from);
    }
    throw store.error("unsupported", operation, from, "is not a regular file");
  }
  if (target.kind === "blocked") {
    throw store.error("conflict", operation, to, `"${target.at}" is a file, not a directory`);
  }
  if (target.kind !== "missing") throw store.error("already_exists", operation, to);
  throwIfAborted(options.signal);
  const created = await createParents(store, io, to, target.existing, operation);
  try {
    if (operation === "clone file" && io.clone !== undefined) await io.clone(from, to);
    else await io.link(from, to);
  } catch (error) {
    if (io.classify(error) === "exists") {
      throw store.error("already_exists", operation, to, undefined, error);
    }
    if (operation === "clone file" && io.classify(error) === "unsupported") {
      throw store.error("unsupported", operation, to, "the filesystem cannot clone files", error);
    }
    throw error;
  }
  store.namesAdded(splitPath(to).parent, created);
}
