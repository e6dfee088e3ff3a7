import { throwIfAborted } from "../adapter/abort.js";
import type { StorageEntry, WalkOptions } from "../backend.js";
import { escapeName, nameProblem } from "../names.js";
import { compareLogicalPaths } from "../paths.js";
import { runInSlices, SliceClock, sortSteps } from "../steps.js";
import type { FsDirEntry } from "./driver.js";
import type { FsStore } from "./store.js";

const OPERATION = "walk";

/**
 * Lists entries below `prefix` in byte order, failing with `limit_exceeded` past `limit`. Every
 * entry is listed, never followed: symlinks and special files as `symlink` / `other`, names that
 * are not logical paths escaped with their `nameProblem`; the walk descends only into
 * directories it can address. A missing prefix, or one that is a file, yields an empty list.
 */
export async function walkTree<Handle>(
  store: FsStore<Handle>,
  prefix: string,
  options: WalkOptions,
): Promise<StorageEntry[]> {
  const { signal, limit } = options;
  const io = store.driver.scope(signal);
  if (prefix !== "") {
    const state = await store.inspect(io, prefix, OPERATION);
    if (state.kind !== "directory") return [];
  }
  const entries: StorageEntry[] = [];
  const pending: string[] = [prefix];
  // A driver whose calls never wait (local) would otherwise hold off signals, timers (lease
  // renewals, progress) and every other request of `distributor serve` for the whole of a large
  // walk: the event loop turns between batches of listings once a slice of time went by. (Turning
  // every 64 listings instead held it for over a second at a time on a source of 10⁶ files.)
  const clock = new SliceClock();
  while (pending.length > 0) {
    throwIfAborted(signal);
    const batch = pending.splice(0, io.capabilities.parallelism);
    if (clock.due()) await clock.turn();
    const listings = await Promise.all(
      batch.map(async (directory) => {
        try {
          return await io.readdir(directory, limit - entries.length);
        } catch (error) {
          // Name the directory that failed (an unreadable one deep below the prefix, say).
          throw io.toStorageError(error, OPERATION, directory === "" ? prefix : directory);
        }
      }),
    );
    for (let index = 0; index < batch.length; index++) {
      const directory = batch[index] as string;
      for (const listedEntry of listings[index] ?? []) {
        const entry = describeEntry(directory, listedEntry, options.bare === true);
        entries.push(entry);
        if (entries.length > limit) {
          throw store.error("limit_exceeded", OPERATION, prefix, `more than ${limit} entries`);
        }
        if (entry.kind === "directory" && entry.nameProblem === undefined) {
          store.markVerified(entry.path);
          if (options.recursive) pending.push(entry.path);
        }
      }
    }
  }
  return runInSlices(
    sortSteps(entries, (left, right) => compareLogicalPaths(left.path, right.path)),
  );
}

/** A listed entry as a `StorageEntry` below `directory`; `bare` leaves out its date and version. */
function describeEntry(directory: string, listed: FsDirEntry, bare: boolean): StorageEntry {
  const raw = typeof listed.name === "string" ? Buffer.from(listed.name, "utf8") : listed.name;
  const problem = listed.nameProblem ?? nameProblem(raw);
  // A decoded name that lost bytes shows where: U+FFFD escaped like any other character.
  const name =
    problem === undefined && typeof listed.name === "string"
      ? listed.name
      : escapeName(raw).replaceAll("\ufffd", "\\ufffd");
  const path = directory === "" ? name : `${directory}/${name}`;
  const { stats } = listed;
  const entry: StorageEntry = {
    path,
    kind: stats.kind,
    size: stats.kind === "file" ? stats.size : 0,
  };
  if (!bare) {
    entry.modifiedAt = new Date(stats.mtimeMs);
    if (stats.kind === "file") entry.version = stats.version;
  }
  if (problem !== undefined) entry.nameProblem = problem;
  return entry;
}
