import { isStorageError, locatePath, type StorageBackend } from "@distributor/storage";

/**
 * The state changed since planning read it (another writer committed first): nothing of this
 * attempt was committed and its new outputs were removed, so the caller may plan again.
 */
export class StateChangedError extends Error {
  override readonly name = "StateChangedError";
  readonly code = "state_changed";
}

/**
 * A state write's outcome is unknown: it failed in a way that does not prove nothing was
 * written (a lost answer, a timeout, a reset) and reading it back did not show this attempt's
 * bytes. The state may still become the new one; the journal decides at the next run.
 */
export class AmbiguousCommitError extends Error {
  override readonly name = "AmbiguousCommitError";
  readonly code = "commit_unknown";
}

/**
 * After a write whose outcome is unknown: the version of `path` when it holds exactly `bytes`
 * (the write happened), undefined when it holds something else or nothing, and `"unreadable"`
 * when even the read failed (nothing can be decided).
 */
export async function readBack(
  backend: StorageBackend,
  path: string,
  bytes: string | Uint8Array,
  signal?: AbortSignal,
): Promise<string | undefined> {
  const expected = typeof bytes === "string" ? Buffer.from(bytes, "utf8") : bytes;
  try {
    const found = await backend.readVersioned(path, {
      maxBytes: expected.byteLength,
      ...(signal ? { signal } : {}),
    });
    return Buffer.from(found.bytes).equals(expected) ? found.version : undefined;
  } catch (error) {
    if (isStorageError(error, "not_found") || isStorageError(error, "limit_exceeded")) {
      return undefined;
    }
    return UNREADABLE;
  }
}

export const UNREADABLE = "\0unreadable";

/**
 * The compare-and-swap of a state file (docs/design/commit-protocol.md): `bytes` replace the file only while it is still
 * at `version` (or, without one, only where no file is). Any failure is resolved by reading the
 * file back: holding exactly `bytes`, the write happened (its answer was lost, or an SDK retry
 * saw its own write as a conflict). A refusal with other bytes there is a `StateChangedError`;
 * anything else an `AmbiguousCommitError`, since a request the store holds may still land.
 * Resolves with the version written.
 */
export async function compareAndSwapState(
  backend: StorageBackend,
  path: string,
  bytes: Uint8Array,
  version: string | undefined,
  signal: AbortSignal | undefined,
): Promise<string> {
  // A commit: flushed whatever the store's fsync setting, one conditional PUT on S3.
  const options = { contentType: "application/json", commit: true, signal };
  try {
    const written =
      version === undefined
        ? await backend.writeFile(path, bytes, { ...options, overwrite: false })
        : await backend.writeFile(path, bytes, { ...options, ifMatch: version });
    return written.version;
  } catch (error) {
    // Read back even when the run was interrupted: what happened must be known.
    const found = await readBack(backend, path, bytes);
    if (found !== undefined && found !== UNREADABLE) return found;
    const where = locatePath(backend.location, path);
    const refused = isStorageError(error, "conflict") || isStorageError(error, "already_exists");
    if (refused && found !== UNREADABLE) {
      throw new StateChangedError(
        `${where} changed since it was planned from; nothing was committed`,
        { cause: error },
      );
    }
    const readBackFailed = found === UNREADABLE ? " and reading it back failed too" : "";
    throw new AmbiguousCommitError(
      `writing ${where} failed (${(error as Error).message})${readBackFailed}: whether it was committed is not known; the next run resolves it from the journal`,
      { cause: error },
    );
  }
}
