import type { EntryKind, StorageEntry } from "@distributor/storage";
import { escapeName, nameProblem } from "@distributor/storage/adapter";
import type { FileEntryWithStats } from "ssh2";
import { hasStatus, STATUS } from "./errors.js";
import { kindOf, type Remote, remoteVersion } from "./remote.js";

/**
 * The entries of one remote directory (without `.` and `..`), read batch by batch; `undefined`
 * when the directory does not exist (or is not a directory). `stopAfter` ends the listing early
 * once that many entries were read.
 */
export async function listDirectory(
  shared: Remote,
  remotePath: string,
  stopAfter = Number.POSITIVE_INFINITY,
): Promise<FileEntryWithStats[] | undefined> {
  const remote = shared.onLane();
  let handle: Buffer;
  try {
    handle = await remote.call<Buffer>((sftp, done) => sftp.opendir(remotePath, done));
  } catch (error) {
    if (hasStatus(error, STATUS.NO_SUCH_FILE)) return undefined;
    throw error;
  }
  const entries: FileEntryWithStats[] = [];
  try {
    while (entries.length <= stopAfter) {
      let batch: FileEntryWithStats[];
      try {
        batch = await remote.call<FileEntryWithStats[]>((sftp, done) =>
          sftp.readdir(handle, done as never),
        );
      } catch (error) {
        if (hasStatus(error, STATUS.EOF)) break;
        throw error;
      }
      if (!Array.isArray(batch) || batch.length === 0) break;
      for (const entry of batch) {
        if (entry.filename !== "." && entry.filename !== "..") entries.push(entry);
      }
    }
    return entries;
  } finally {
    await remote.tidy((sftp, done) => sftp.close(handle, done));
  }
}

/**
 * A listed entry as a `StorageEntry` below `directory` (logical). ssh2 decodes names as UTF-8,
 * replacing bytes that are not with U+FFFD, so such a name is reported as not UTF-8: it cannot
 * be addressed by any logical path.
 */
export function describeEntry(directory: string, entry: FileEntryWithStats): StorageEntry {
  const bytes = Buffer.from(entry.filename, "utf8");
  const undecodable = entry.filename.includes("\ufffd");
  const problem = undecodable
    ? "name is not valid UTF-8 (or holds U+FFFD)"
    : nameProblem(new Uint8Array(bytes));
  const name =
    problem === undefined
      ? entry.filename
      : escapeName(new Uint8Array(bytes)).replaceAll("\ufffd", "\\ufffd");
  const path = directory === "" ? name : `${directory}/${name}`;
  const kind: EntryKind = kindOf(entry.attrs);
  const described: StorageEntry = {
    path,
    kind,
    size: kind === "file" ? entry.attrs.size : 0,
    modifiedAt: new Date(entry.attrs.mtime * 1000),
  };
  if (kind === "file") described.version = remoteVersion(entry.attrs);
  if (problem !== undefined) described.nameProblem = problem;
  return described;
}
