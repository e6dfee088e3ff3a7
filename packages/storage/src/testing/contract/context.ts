import { expect } from "vitest";
import type { ByteReader, StorageBackend, StorageEntry } from "../../backend.js";
import { isStorageError, type StorageError, type StorageErrorKind } from "../../errors.js";

/** What a backend's semantics allow the contract to expect beyond the common ground. */
export interface BackendCapabilities {
  /**
   * Version tokens derive from the content (S3 ETags), so writing the same bytes again yields the
   * same version. Compare-and-swap stays safe: a state replaced by identical bytes plans the same.
   */
  contentDerivedVersions?: boolean;
  /** `StorageBackend.links` is offered (absent: the backend has none). */
  links?: "full";
}

/** What every group of the contract works with: the backend of the running test and helpers. */
export interface ContractContext {
  /** The fresh, empty backend of the running test. */
  backend(): StorageBackend;
  capabilities: BackendCapabilities;
  /** Writes each file (no-clobber) with its UTF-8 text. */
  put(files: Record<string, string>): Promise<void>;
  readText(path: string): Promise<string>;
  /** `f path size` / `d path` lines of a recursive walk below `prefix`. */
  tree(prefix?: string): Promise<string[]>;
  /** Paths of every file stored. */
  files(): Promise<string[]>;
}

/** Awaits a promise that must reject with a `StorageError` of `kind`, and returns that error. */
export async function expectStorageError(
  promise: Promise<unknown>,
  kind: StorageErrorKind,
): Promise<StorageError> {
  const outcome = await promise.then(
    (value: unknown) => ({ value }),
    (error: unknown) => ({ error }),
  );
  if (!("error" in outcome)) {
    throw new Error(`expected a StorageError of kind ${kind}, but the call succeeded`);
  }
  const { error } = outcome;
  if (!isStorageError(error)) {
    throw new Error(`expected a StorageError of kind ${kind}, got ${String(error)}`, {
      cause: error,
    });
  }
  expect(error.kind, error.message).toBe(kind);
  return error;
}

export const expectKind = expectStorageError;

/** `f path size` for files and `d path` for directories: short, readable walk snapshots. */
export function summarize(entries: readonly StorageEntry[]): string[] {
  return entries.map((entry) => {
    if (entry.kind === "directory") {
      expect(entry.size).toBe(0);
      return `d ${entry.path}`;
    }
    return `f ${entry.path} ${entry.size}`;
  });
}

/** A deterministic byte pattern in 64 KiB chunks, regenerated for comparison. */
/**
 * A `ByteReader` over `bytes`, read at most 100 000 bytes at a time; with `failure`, the read
 * after the first one rejects with it.
 */
export function bufferReader(
  bytes: Buffer,
  failure?: Error,
): ByteReader & { readonly closed: boolean } {
  let offset = 0;
  let reads = 0;
  let closed = false;
  return {
    async read(into: Uint8Array): Promise<number> {
      if (closed) throw new Error("read after close");
      reads++;
      if (failure !== undefined && reads > 1) throw failure;
      const length = Math.min(into.length, 100_000, bytes.length - offset);
      into.set(bytes.subarray(offset, offset + length));
      offset += length;
      return length;
    },
    close(): void {
      closed = true;
    },
    get closed() {
      return closed;
    },
  };
}

export async function* patternChunks(size: number): AsyncGenerator<Uint8Array> {
  const chunkSize = 64 * 1024;
  for (let offset = 0; offset < size; offset += chunkSize) {
    const length = Math.min(chunkSize, size - offset);
    yield Uint8Array.from({ length }, (_, index) => (offset + index) % 251);
  }
}
