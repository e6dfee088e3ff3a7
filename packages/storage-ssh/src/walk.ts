import { compareLogicalPaths, type StorageEntry, type WalkOptions } from "@distributor/storage";
import { throwIfAborted } from "@distributor/storage/adapter";
import { sshError } from "./errors.js";
import { describeEntry, listDirectory } from "./list.js";
import type { Remote } from "./remote.js";

const OPERATION = "walk";
/** Directories listed at once during a recursive walk. */
const LISTINGS_IN_FLIGHT = 8;

/**
 * Lists entries below `prefix` in byte order, failing with `limit_exceeded` past `limit`. Every
 * entry is listed, never followed: symlinks and special files as `symlink` / `other`, names that
 * are not logical paths escaped with their `nameProblem`; the walk descends only into
 * directories it can address. A missing prefix, or one that is a file, yields an empty list.
 */
export async function walkTree(
  remote: Remote,
  prefix: string,
  options: WalkOptions,
): Promise<StorageEntry[]> {
  const { signal, limit } = options;
  if (prefix !== "") {
    const state = await remote.inspect(prefix, OPERATION);
    if (state.kind !== "directory") return [];
  }
  const entries: StorageEntry[] = [];
  const pending: string[] = [prefix];
  while (pending.length > 0) {
    throwIfAborted(signal);
    const batch = pending.splice(0, LISTINGS_IN_FLIGHT);
    const listings = await Promise.all(
      batch.map((directory) =>
        listDirectory(remote, remote.path(directory), limit - entries.length),
      ),
    );
    for (let index = 0; index < batch.length; index++) {
      const directory = batch[index] as string;
      for (const listed of listings[index] ?? []) {
        const entry = describeEntry(directory, listed);
        entries.push(entry);
        if (entries.length > limit) {
          throw sshError("limit_exceeded", OPERATION, prefix, `more than ${limit} entries`);
        }
        if (entry.kind === "directory" && entry.nameProblem === undefined) {
          remote.markVerified(entry.path);
          if (options.recursive) pending.push(entry.path);
        }
      }
    }
  }
  return entries.sort((left, right) => compareLogicalPaths(left.path, right.path));
}
