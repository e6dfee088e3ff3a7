import type { Readable } from "node:stream";
import {
  compareLogicalPaths,
  isStorageError,
  joinPrefix,
  relativeTo,
  type StorageBackend,
  type StorageEntry,
} from "@distributor/storage";
import { mapBounded } from "./concurrency.js";
import { FileHasher } from "./digest.js";
import { type BundleIssue, BundleValidationError } from "./errors.js";
import { fileProblem, storageDetail, walkRefusal } from "./file-problem.js";
import { MANIFEST_FILE_NAME } from "./manifest.js";
import type { Manifest, ManifestFile } from "./manifest-types.js";
import { readManifest } from "./read-manifest.js";

export type UnlistedFilesPolicy = "reject" | "ignore";

/** Defaults of the pipeline's `validation` block (SPEC §4, §8). */
export const DEFAULT_MAX_FILES = 10_000;
export const DEFAULT_MAX_TOTAL_SIZE = 10_000_000_000;
/** Files hashed at once: enough to hide remote round trips, few enough to keep memory flat. */
export const DEFAULT_VALIDATION_CONCURRENCY = 4;

export interface ValidateBundleOptions {
  /** `validation.unlisted_files`; default `reject`. */
  unlistedFiles?: UnlistedFilesPolicy;
  /** `validation.max_files`; default 10000. */
  maxFiles?: number;
  /** `validation.max_total_size` in bytes; default 10 GB. */
  maxTotalSize?: number;
  /** Files hashed concurrently; default 4. */
  concurrency?: number;
  signal?: AbortSignal;
  /** Called after each listed file has been checked, for progress displays. */
  onFile?: (progress: FileCheckProgress) => void;
}

export interface FileCheckProgress {
  /** Bundle-relative path. */
  path: string;
  size: number;
  /** Position of the file in the manifest (0-based) and the number of listed files. */
  index: number;
  count: number;
  ok: boolean;
}

export interface ValidatedBundle {
  /** Logical path of the bundle directory (`""` for the backend root). */
  path: string;
  manifest: Manifest;
  /** Sum of the listed file sizes. */
  totalSize: number;
  /** Files present but not listed, tolerated because `unlistedFiles` is `ignore`. */
  unlistedFiles: string[];
}

/**
 * Checks a bundle against SPEC §4 before anything is published: the manifest parses and respects
 * the limits; every listed file is a regular file with the listed size and SHA-256 (streamed, one
 * chunk in memory per file being hashed); no file is unlisted (unless ignored) and no
 * `manifest.json` hides below the root. Every problem found is reported in one
 * `BundleValidationError`; storage failures that say nothing about the bundle propagate as they are.
 */
export async function validateBundle(
  backend: StorageBackend,
  bundlePath: string,
  options: ValidateBundleOptions = {},
): Promise<ValidatedBundle> {
  const maxFiles = checkLimit("maxFiles", options.maxFiles ?? DEFAULT_MAX_FILES, 1);
  const maxTotalSize = checkLimit(
    "maxTotalSize",
    options.maxTotalSize ?? DEFAULT_MAX_TOTAL_SIZE,
    0,
  );
  const concurrency = checkLimit(
    "concurrency",
    options.concurrency ?? DEFAULT_VALIDATION_CONCURRENCY,
    1,
  );
  const unlistedPolicy = options.unlistedFiles ?? "reject";
  const signal = options.signal;
  const signalOption = signal === undefined ? {} : { signal };

  const manifest = await readManifest(backend, bundlePath, signalOption);
  const totalSize = checkDeclaredLimits(manifest, bundlePath, maxFiles, maxTotalSize);

  const entries = await walkBundle(backend, bundlePath, maxFiles, signal);
  const files = new Map<string, StorageEntry>();
  const directories = new Set<string>();
  for (const entry of entries) {
    const relative = relativeTo(bundlePath, entry.path);
    if (entry.kind === "file") files.set(relative, entry);
    else directories.add(relative);
  }

  const issues: BundleIssue[] = [];
  const listed = new Set(manifest.files.map((file) => file.path));
  const unlistedFiles: string[] = [];
  for (const path of files.keys()) {
    if (path === MANIFEST_FILE_NAME) continue;
    if (isNestedManifest(path)) {
      issues.push({
        code: "nested_manifest",
        path,
        message: `${path}: nested ${MANIFEST_FILE_NAME} below the bundle root (bundles never nest)`,
      });
    } else if (!listed.has(path)) {
      if (unlistedPolicy === "ignore") unlistedFiles.push(path);
      else {
        issues.push({
          code: "unlisted_file",
          path,
          message: `${path}: present but not listed in ${MANIFEST_FILE_NAME}`,
        });
      }
    }
  }

  const count = manifest.files.length;
  const fileIssues = await mapBounded(manifest.files, concurrency, async (file, index) => {
    const problem = await checkListedFile(backend, bundlePath, file, files, directories, signal);
    options.onFile?.({ path: file.path, size: file.size, index, count, ok: problem === undefined });
    return problem;
  });
  for (const issue of fileIssues) if (issue !== undefined) issues.push(issue);

  if (issues.length > 0) {
    issues.sort((a, b) => compareLogicalPaths(a.path, b.path));
    throw new BundleValidationError(issues, { bundlePath });
  }
  unlistedFiles.sort(compareLogicalPaths);
  return { path: bundlePath, manifest, totalSize, unlistedFiles };
}

function checkLimit(name: string, value: number, minimum: number): number {
  if (!Number.isSafeInteger(value) || value < minimum) {
    throw new RangeError(`${name} must be an integer of at least ${minimum}, got ${String(value)}`);
  }
  return value;
}

/** Refuses, before reading any file, a manifest that declares more than the limits allow. */
function checkDeclaredLimits(
  manifest: Manifest,
  bundlePath: string,
  maxFiles: number,
  maxTotalSize: number,
): number {
  const issues: BundleIssue[] = [];
  const count = manifest.files.length;
  if (count > maxFiles) {
    issues.push({
      code: "too_many_files",
      path: MANIFEST_FILE_NAME,
      message: `${MANIFEST_FILE_NAME}: lists ${count} files, more than validation.max_files ${maxFiles}`,
      expected: maxFiles,
      actual: count,
    });
  }
  const totalSize = manifest.files.reduce((sum, file) => sum + file.size, 0);
  if (totalSize > maxTotalSize) {
    issues.push({
      code: "total_size_exceeded",
      path: MANIFEST_FILE_NAME,
      message: `${MANIFEST_FILE_NAME}: files total ${totalSize} bytes, more than validation.max_total_size ${maxTotalSize}`,
      expected: maxTotalSize,
      actual: totalSize,
    });
  }
  if (issues.length > 0) throw new BundleValidationError(issues, { bundlePath });
  return totalSize;
}

/**
 * Lists the bundle once, bounded: listed files plus a manifest, with room for their directories
 * and a few strays; anything larger is refused rather than walked.
 */
async function walkBundle(
  backend: StorageBackend,
  bundlePath: string,
  maxFiles: number,
  signal: AbortSignal | undefined,
): Promise<StorageEntry[]> {
  const limit = walkLimit(maxFiles);
  try {
    return await backend.walk(bundlePath, {
      recursive: true,
      limit,
      ...(signal === undefined ? {} : { signal }),
    });
  } catch (error) {
    if (isStorageError(error, "limit_exceeded")) {
      throw new BundleValidationError(
        [
          {
            code: "too_many_entries",
            path: "",
            message: `bundle holds more than ${limit} files and directories (validation.max_files is ${maxFiles})`,
            expected: limit,
          },
        ],
        { bundlePath, cause: error },
      );
    }
    const refusal = walkRefusal(error, bundlePath);
    if (refusal !== undefined)
      throw new BundleValidationError([refusal], { bundlePath, cause: error });
    throw error;
  }
}

/** Walk bound for a bundle: files and directories both count as entries. */
export function walkLimit(maxFiles: number): number {
  return maxFiles * 2 + 64;
}

function isNestedManifest(path: string): boolean {
  return path.endsWith(`/${MANIFEST_FILE_NAME}`);
}

async function checkListedFile(
  backend: StorageBackend,
  bundlePath: string,
  file: ManifestFile,
  walked: ReadonlyMap<string, StorageEntry>,
  directories: ReadonlySet<string>,
  signal: AbortSignal | undefined,
): Promise<BundleIssue | undefined> {
  const { path } = file;
  const fullPath = joinPrefix(bundlePath, path);
  if (directories.has(path)) {
    return {
      code: "not_regular_file",
      path,
      message: `${path}: is a directory, not a regular file`,
    };
  }
  const entry = walked.get(path);
  if (entry === undefined) {
    // Not walked: missing, or something the walk does not list as a file (a symlink). Ask.
    const problem = await statProblem(backend, fullPath, path, signal);
    if (problem !== undefined) return problem;
  } else if (entry.size !== file.size) {
    return sizeMismatch(path, file.size, entry.size);
  }

  let stream: Readable;
  try {
    stream = await backend.openRead(fullPath, signal === undefined ? {} : { signal });
  } catch (error) {
    const problem = storageProblem(error, path);
    if (problem !== undefined) return problem;
    throw error;
  }
  const hashed = await hashAtMost(stream, file.size, signal);
  if (hashed.overflow) {
    return sizeMismatch(path, file.size, `more than ${file.size} (file grew while reading)`);
  }
  const digest = hashed.hasher.digest();
  if (digest.size !== file.size) return sizeMismatch(path, file.size, digest.size);
  if (digest.sha256 !== file.sha256) {
    return {
      code: "sha256_mismatch",
      path,
      message: `${path}: sha256 mismatch: expected ${file.sha256}, got ${digest.sha256}`,
      expected: file.sha256,
      actual: digest.sha256,
    };
  }
  return undefined;
}

async function statProblem(
  backend: StorageBackend,
  fullPath: string,
  path: string,
  signal: AbortSignal | undefined,
): Promise<BundleIssue | undefined> {
  try {
    const entry = await backend.stat(fullPath, signal === undefined ? {} : { signal });
    if (entry.kind !== "file") {
      return {
        code: "not_regular_file",
        path,
        message: `${path}: is a ${entry.kind}, not a regular file`,
      };
    }
    return undefined;
  } catch (error) {
    const problem = storageProblem(error, path);
    if (problem !== undefined) return problem;
    throw error;
  }
}

function storageProblem(error: unknown, path: string): BundleIssue | undefined {
  const problem = fileProblem(error);
  if (problem === "missing") {
    return {
      code: "missing_file",
      path,
      message: `${path}: listed in ${MANIFEST_FILE_NAME} but missing`,
    };
  }
  if (problem === "not_regular" && isStorageError(error)) {
    return {
      code: "not_regular_file",
      path,
      message: `${path}: not a regular file: ${storageDetail(error)}`,
    };
  }
  return undefined;
}

function sizeMismatch(path: string, expected: number, actual: number | string): BundleIssue {
  return {
    code: "size_mismatch",
    path,
    message: `${path}: size mismatch: expected ${expected}, got ${actual}`,
    expected,
    actual,
  };
}

/**
 * Hashes a stream, stopping once it yields more than `expected` bytes: a file growing under us
 * must not make validation read without bound.
 */
async function hashAtMost(
  stream: Readable,
  expected: number,
  signal: AbortSignal | undefined,
): Promise<{ hasher: FileHasher; overflow: boolean }> {
  const hasher = new FileHasher();
  const onAbort = () => stream.destroy(signal?.reason);
  signal?.addEventListener("abort", onAbort, { once: true });
  try {
    signal?.throwIfAborted();
    for await (const chunk of stream) {
      hasher.update(chunk as Uint8Array);
      if (hasher.size > expected) return { hasher, overflow: true };
    }
    return { hasher, overflow: false };
  } catch (error) {
    signal?.throwIfAborted();
    throw error;
  } finally {
    signal?.removeEventListener("abort", onAbort);
    stream.destroy();
  }
}
