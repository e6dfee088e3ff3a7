import { createHash } from "node:crypto";
import {
  displayPath,
  isStorageError,
  joinPrefix,
  runInSlices,
  runSteps,
  type Steps,
  type StorageBackend,
  type VersionedReader,
} from "@distributor/storage";
import { BundleValidationError, ManifestError } from "./errors.js";
import { storageDetail } from "./file-problem.js";
import { canonicalManifestPiecesSteps, parseFrozenManifestPiecesSteps } from "./manifest.js";
import { MANIFEST_FILE_NAME } from "./manifest-checks.js";
import type { Manifest } from "./manifest-types.js";
import {
  isUtf8Steps,
  runWithStreamedPieces,
  StreamedUtf8Pieces,
  utf8Pieces,
} from "./utf8-pieces.js";

/**
 * Manifests list files, not content: the least any manifest may have, and the bound when no file
 * limit is known.
 */
export const MAX_MANIFEST_BYTES = 16 * 1024 * 1024;

/** What a listed file may add to its manifest: a path of several hundred bytes, digest, size. */
export const MANIFEST_BYTES_PER_FILE = 1024;

/** Below the longest string V8 holds (2^29 - 24 characters): the manifest is parsed as one. */
const LARGEST_MANIFEST_BYTES = 500 * 1024 * 1024;

/**
 * The most bytes a manifest of at most `maxFiles` files may have: 1 KiB per file, at least
 * `MAX_MANIFEST_BYTES`, at most what can be parsed. Bounded by the file limit, not beside it, so a
 * limit raised for a bigger bundle raises this one too.
 */
export function manifestByteLimit(maxFiles: number | undefined): number {
  if (maxFiles === undefined) return MAX_MANIFEST_BYTES;
  return Math.min(
    LARGEST_MANIFEST_BYTES,
    Math.max(MAX_MANIFEST_BYTES, maxFiles * MANIFEST_BYTES_PER_FILE),
  );
}

export interface ReadManifestOptions {
  signal?: AbortSignal | undefined;
  /** The most files the reader accepts (`validation.max_files`): bounds the bytes read. */
  maxFiles?: number | undefined;
  /** Overrides the bound `maxFiles` gives (default `MAX_MANIFEST_BYTES`). */
  maxBytes?: number | undefined;
  /** What messages call `maxFiles` (default `validation.max_files`, the pipeline's setting). */
  maxFilesName?: string | undefined;
}

/**
 * Reads and parses `<bundlePath>/manifest.json`, frozen (`parseFrozenManifest`): a bundle's
 * manifest is only read, and a frozen one is known valid without hashing it again when a state
 * embeds it (a fraction of a second at 10⁵ files). A missing manifest is a `BundleValidationError`
 * (`missing_manifest`), so is one the backend refuses to read (a symlink or a directory:
 * `not_regular_file`); an oversized, non-UTF-8 or invalid one is a `ManifestError` naming the
 * manifest's logical path. Other storage failures propagate as `StorageError`.
 */
export async function readManifest(
  backend: StorageBackend,
  bundlePath: string,
  options: ReadManifestOptions = {},
): Promise<Manifest> {
  const source = displayPath(joinPrefix(bundlePath, MANIFEST_FILE_NAME));
  const streamed = await readStreamedManifest(backend, bundlePath, options, source);
  if (streamed !== undefined) return streamed;
  const bytes = await readManifestBytes(backend, bundlePath, options);
  // A million-file manifest takes seconds to check: the event loop turns meanwhile.
  return runInSlices(parseManifestBytesSteps(bytes, source));
}

/**
 * A canonical manifest parsed as it is read, a chunk at a time, when the backend reads so
 * (`openVersionedReader`): a million-file manifest (160 MB) is never held whole. Undefined when
 * the backend cannot, or the file cannot be read or is not a canonical valid manifest: the caller
 * reads it whole, for the verdict and message it has always given.
 */
async function readStreamedManifest(
  backend: StorageBackend,
  bundlePath: string,
  options: ReadManifestOptions,
  source: string,
): Promise<Manifest | undefined> {
  if (backend.openVersionedReader === undefined) return undefined;
  const maxBytes = options.maxBytes ?? manifestByteLimit(options.maxFiles);
  const path = joinPrefix(bundlePath, MANIFEST_FILE_NAME);
  let opened: VersionedReader;
  try {
    opened = await backend.openVersionedReader(path, { maxBytes, signal: options.signal });
  } catch {
    return undefined;
  }
  try {
    const hash = createHash("sha256");
    // A byte order mark stays in the text: such a text is not canonical.
    const pieces = new StreamedUtf8Pieces(opened.reader, {
      keepBom: true,
      onBytes: (bytes) => hash.update(bytes),
    });
    const steps = canonicalManifestPiecesSteps(pieces, source, () => hash.digest("hex"));
    return await runWithStreamedPieces(steps, pieces);
  } catch {
    return undefined;
  } finally {
    opened.reader.close();
  }
}

/** The bytes of `<bundlePath>/manifest.json`, failing as `readManifest` does. */
export async function readManifestBytes(
  backend: StorageBackend,
  bundlePath: string,
  options: ReadManifestOptions = {},
): Promise<Uint8Array> {
  const manifestPath = joinPrefix(bundlePath, MANIFEST_FILE_NAME);
  const source = displayPath(manifestPath);
  const maxBytes = options.maxBytes ?? manifestByteLimit(options.maxFiles);
  try {
    return await backend.readFile(manifestPath, {
      maxBytes,
      signal: options.signal,
    });
  } catch (error) {
    if (isStorageError(error, "not_found")) {
      throw new BundleValidationError(
        [
          {
            code: "missing_manifest",
            path: MANIFEST_FILE_NAME,
            message: `${MANIFEST_FILE_NAME}: not found in ${backend.location} at ${displayPath(bundlePath)}`,
          },
        ],
        { bundlePath, cause: error },
      );
    }
    if (isStorageError(error, "unsupported")) {
      throw new BundleValidationError(
        [
          {
            code: "not_regular_file",
            path: MANIFEST_FILE_NAME,
            message: `${MANIFEST_FILE_NAME}: not a regular file: ${storageDetail(error)}`,
          },
        ],
        { bundlePath, cause: error },
      );
    }
    if (isStorageError(error, "limit_exceeded")) {
      const name = options.maxFilesName ?? "validation.max_files";
      const why =
        options.maxBytes === undefined && options.maxFiles !== undefined
          ? ` (${MANIFEST_BYTES_PER_FILE} per file of ${name} ${options.maxFiles}, at least ${MAX_MANIFEST_BYTES}); raise ${name} to accept a bigger manifest`
          : "";
      throw new ManifestError(`manifest is larger than ${maxBytes} bytes${why}`, {
        source,
        cause: error,
      });
    }
    throw error;
  }
}

/** Parses manifest bytes as UTF-8 JSON, frozen; `source` names the manifest in errors. */
export function parseManifestBytes(bytes: Uint8Array, source: string): Manifest {
  return runSteps(parseManifestBytesSteps(bytes, source));
}

/**
 * `parseManifestBytes` in steps (`parseFrozenManifestSteps`). The text is read from the bytes a
 * piece at a time (`utf8Pieces`): a million-file manifest (160 MB) is not held a second time as
 * one string while it is parsed, unless it is not canonical.
 */
export function* parseManifestBytesSteps(bytes: Uint8Array, source: string): Steps<Manifest> {
  if (!(yield* isUtf8Steps(bytes))) {
    const cause = new TypeError("The encoded data was not valid for encoding utf-8");
    throw new ManifestError("manifest is not valid UTF-8", { source, cause });
  }
  // A byte order mark stays in the text, so the strict parser reports it rather than hiding it.
  return yield* parseFrozenManifestPiecesSteps(utf8Pieces(bytes), source);
}
