import type { Readable } from "node:stream";
import {
  type DeleteOptions,
  isStorageError,
  mapBounded,
  type OperationOptions,
  type ReadOptions,
  type StorageBackend,
  type StorageEntry,
  StorageError,
  type StorageOperation,
  type VersionedFile,
  type WalkOptions,
  type WriteData,
  type WriteOptions,
  type WriteResult,
} from "@distributor/storage";
import {
  type BackendOperations,
  frameBackend,
  throwIfAborted,
  type WriteOperation,
} from "@distributor/storage/adapter";
import { describeServer, openSession } from "./connect.js";
import { BACKEND_NAME, hasStatus, STATUS, sshError, toStorageError } from "./errors.js";
import { listDirectory } from "./list.js";
import type { SshBackendOptions } from "./options.js";
import { openReadStream, readWholeFile } from "./read.js";
import { Remote, remoteVersion } from "./remote.js";
import { emptyDirectory, pruneEmptyParents, removeTree, unlinkIfMatch } from "./remove.js";
import type { Session } from "./session.js";
import { walkTree } from "./walk.js";
import { writeAtomically } from "./write.js";

/** Targets of one managed delete checked or deleted at once. */
const TARGETS_IN_FLIGHT = 16;

/**
 * Connects to the server and returns a backend over the directory `root` there. The one SSH
 * connection is reused by every operation until `close`. See the package README for semantics.
 */
export async function createSshBackend(options: SshBackendOptions): Promise<StorageBackend> {
  const session = await openSession(options);
  const root = normaliseRoot(options.root);
  const location = `${BACKEND_NAME}:${describeServer(options)}${root.startsWith("/") ? "" : "/"}${root}`;
  return frameBackend(
    {
      name: BACKEND_NAME,
      location,
      // Size and whole-second mtime: two writes of one path can share a version.
      versionsMayRepeat: true,
      // Enough files in flight to keep every channel busy while others wait on an fsync.
      writeConcurrency: 8,
      mapError: (error, operation, path) => mapError(session, error, operation, path),
    },
    new SshOperations(new Remote(session, root), options.fsync ?? true),
  );
}

function normaliseRoot(root: string): string {
  if (root === "" || root === ".") return ".";
  const trimmed = root.replace(/\/+$/, "");
  return trimmed === "" ? "/" : trimmed;
}

/** A dropped or timed-out connection is `unavailable`, whatever the request itself reported. */
function mapError(
  session: Session,
  error: unknown,
  operation: StorageOperation,
  path: string,
): StorageError {
  if (error instanceof StorageError) return error;
  const lost = session.lost;
  if (lost !== undefined) return sshError("unavailable", operation, path, lost.message, error);
  return toStorageError(error, operation, path);
}

class SshOperations implements BackendOperations {
  constructor(
    readonly remote: Remote,
    readonly fsync: boolean,
  ) {}

  async readFile(path: string, options: ReadOptions): Promise<Uint8Array> {
    return (await this.readVersioned(path, options)).bytes;
  }

  readVersioned(path: string, options: ReadOptions): Promise<VersionedFile> {
    const remote = this.remote.forOperation(options.signal);
    return readWholeFile(remote, path, options.maxBytes, options.signal);
  }

  openRead(path: string, options: OperationOptions): Promise<Readable> {
    return openReadStream(this.remote.forOperation(options.signal), path, options.signal);
  }

  writeFile(
    path: string,
    data: WriteData,
    operation: WriteOperation,
    options: WriteOptions,
  ): Promise<WriteResult> {
    const remote = this.remote.forOperation(options.signal);
    return writeAtomically(remote, path, data, options, operation, this.fsync);
  }

  async stat(path: string, options: OperationOptions): Promise<StorageEntry> {
    const state = await this.remote.forOperation(options.signal).inspect(path, "stat");
    switch (state.kind) {
      case "missing":
      case "blocked":
        throw sshError("not_found", "stat", path);
      case "file":
        return {
          path,
          kind: "file",
          size: state.attrs.size,
          modifiedAt: new Date(state.attrs.mtime * 1000),
          version: remoteVersion(state.attrs),
        };
      case "directory":
        return {
          path,
          kind: "directory",
          size: 0,
          modifiedAt: new Date(state.attrs.mtime * 1000),
        };
      case "other":
        throw sshError("unsupported", "stat", path, "is not a regular file or directory");
    }
  }

  walk(prefix: string, options: WalkOptions): Promise<StorageEntry[]> {
    return walkTree(this.remote.forOperation(options.signal), prefix, options);
  }

  async hasAny(prefix: string, options: OperationOptions): Promise<boolean> {
    const remote = this.remote.forOperation(options.signal);
    if (prefix !== "") {
      const state = await remote.inspect(prefix, "has any");
      if (state.kind === "missing" || state.kind === "blocked") return false;
      if (state.kind !== "directory") return true;
    }
    const entries = await listDirectory(remote, remote.path(prefix), 1);
    return entries !== undefined && entries.length > 0;
  }

  /**
   * Checks every target before deleting any, so a bad target fails without a partial delete.
   * A fenced target (`options.ifMatch`) is deleted only at its version, under its swap lock; one
   * at another version stays, and the first of those in target order fails the call as
   * `conflict` once every other target is deleted.
   */
  async deleteManaged(
    operation: StorageOperation,
    targets: readonly string[],
    options: DeleteOptions,
  ): Promise<void> {
    const { signal } = options;
    const remote = this.remote.forOperation(signal);
    // Checked in parallel, but the refusal reported is that of the first target in order, as on
    // every other backend (a result must not depend on which reply arrived first).
    const checked = await mapBounded(targets, TARGETS_IN_FLIGHT, async (target) => {
      throwIfAborted(signal);
      const state = await remote.inspect(target, operation);
      if (state.kind === "missing" || state.kind === "blocked") {
        if (options.ignoreMissing) return { target: undefined };
        return { refusal: sshError("not_found", operation, target) };
      }
      if (state.kind === "directory") {
        const detail = "is a directory, not a managed file";
        return { refusal: sshError("unsupported", operation, target, detail) };
      }
      if (state.kind === "other") {
        return { refusal: sshError("unsupported", operation, target, "is not a regular file") };
      }
      return { target };
    });
    const refusal = checked.find((result) => "refusal" in result);
    if (refusal !== undefined && "refusal" in refusal) throw refusal.refusal;
    const present = checked.flatMap((result) =>
      "target" in result && result.target !== undefined ? [result.target] : [],
    );
    const conflicts = await mapBounded(present, TARGETS_IN_FLIGHT, async (target) => {
      throwIfAborted(signal);
      const expected = options.ifMatch?.get(target);
      if (expected !== undefined) {
        try {
          const outcome = await unlinkIfMatch(remote, target, expected, operation);
          if (outcome === "missing" && !options.ignoreMissing) {
            throw sshError("not_found", operation, target);
          }
          return undefined;
        } catch (error) {
          if (isStorageError(error, "conflict")) return error;
          throw toStorageError(error, operation, target);
        }
      }
      try {
        await remote.call((sftp, done) => sftp.unlink(remote.path(target), done));
      } catch (error) {
        if (!(options.ignoreMissing && hasStatus(error, STATUS.NO_SUCH_FILE))) {
          throw toStorageError(error, operation, target);
        }
      }
      return undefined;
    });
    if (options.pruneEmptyDirs) {
      const deleted = present.filter((_, index) => conflicts[index] === undefined);
      await pruneEmptyParents(remote, deleted);
    }
    const conflict = conflicts.find((error) => error !== undefined);
    if (conflict !== undefined) throw conflict;
  }

  async deletePrefix(prefix: string, options: DeleteOptions): Promise<void> {
    const { signal } = options;
    const remote = this.remote.forOperation(signal);
    const keep = options.keep === undefined ? undefined : new Set(options.keep);
    if (prefix === "") {
      // The root is kept, and a root that does not exist yet is simply empty.
      remote.forget("");
      await emptyDirectory(remote, remote.path(""), keep, "", signal);
      return;
    }
    const state = await remote.inspect(prefix, "delete prefix");
    if (state.kind === "missing" || state.kind === "blocked") {
      if (options.ignoreMissing) return;
      throw sshError("not_found", "delete prefix", prefix);
    }
    if (state.kind === "other") {
      throw sshError("unsupported", "delete prefix", prefix, "is not a regular file or directory");
    }
    remote.forget(prefix);
    if (keep !== undefined && state.kind === "directory") {
      await emptyDirectory(remote, remote.path(prefix), keep, "", signal);
      return;
    }
    await removeTree(remote, remote.path(prefix), state.kind === "directory", signal);
    if (options.pruneEmptyDirs) await pruneEmptyParents(remote, [prefix]);
  }

  close(): Promise<void> {
    return this.remote.session.close();
  }
}
