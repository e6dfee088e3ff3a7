import {
  displayPath,
  isStorageError,
  joinPrefix,
  mapBounded,
  relativeTo,
  runInSlices,
  SliceClock,
  type StorageBackend,
  type StorageEntry,
} from "@distributor/storage";
import { isNestedManifest, nestedManifestIssue, walkBundle, walkLimit } from "./bundle-walk.js";
import { digestFileAtMost } from "./digest.js";
import { type BundleIssue, BundleValidationError, ManifestError } from "./errors.js";
import { fileIssue } from "./file-problem.js";
import { buildManifestSteps } from "./manifest.js";
import { bundleIdProblem, MANIFEST_FILE_NAME, SIGNATURE_FILE_NAME } from "./manifest-checks.js";
import { serializeManifestSteps } from "./manifest-text.js";
import type { Manifest, ManifestFile } from "./manifest-types.js";
import { manifestByteLimit } from "./read-manifest.js";
import { isRepresentableDate, truncateToSeconds } from "./timestamp.js";
import { checkLimit, DEFAULT_VALIDATION_CONCURRENCY } from "./validate.js";

/** Default bound on the files `createManifest` lists. */
export const DEFAULT_CREATE_MAX_FILES = 100_000;

export interface CreateManifestOptions {
  /** Bundle id (docs/design/bundles.md pattern). */
  id: string;
  /** Creation time; defaults to `now()` truncated to whole seconds. */
  created?: Date;
  /** Replace an existing `manifest.json`. */
  force?: boolean;
  /** Compute the manifest without writing it. */
  dryRun?: boolean;
  /** Most files to list; default 100000. */
  maxFiles?: number;
  /** Clock for the default `created`. */
  now?: () => Date;
  signal?: AbortSignal;
}

export interface CreatedManifest {
  manifest: Manifest;
  /** Logical path of the manifest in the backend. */
  manifestPath: string;
  /** False for a dry run. */
  written: boolean;
}

/**
 * Writes `manifest.json` for the bundle directory `bundlePath` (docs/design/bundles.md "manifest create"): every
 * regular file below it except the root manifest, sorted, with streamed digests and sizes. Refuses
 * symlinks, a nested `manifest.json`, a root `.distributor.json` (destination state cannot be a
 * bundle file), and an existing manifest unless `force`. The write is atomic.
 */
export async function createManifest(
  backend: StorageBackend,
  bundlePath: string,
  options: CreateManifestOptions,
): Promise<CreatedManifest> {
  const idProblem = bundleIdProblem(options.id);
  if (idProblem !== undefined) throw new ManifestError(idProblem, { field: "id" });
  const created = options.created ?? truncateToSeconds((options.now ?? (() => new Date()))());
  if (!isRepresentableDate(created)) {
    throw new ManifestError("created must be a valid date in the years 0000–9999", {
      field: "created",
    });
  }
  const maxFiles = checkLimit("maxFiles", options.maxFiles ?? DEFAULT_CREATE_MAX_FILES, 0);
  const force = options.force ?? false;
  const signal = options.signal;
  const manifestPath = joinPrefix(bundlePath, MANIFEST_FILE_NAME);

  // Fail before hashing anything; the no-clobber write below still guards against a race.
  if (!force && (await exists(backend, manifestPath, signal)))
    throw manifestExists(bundlePath, manifestPath);

  const candidates = await listBundleFiles(backend, bundlePath, maxFiles, signal);
  const digests = await mapBounded(candidates, DEFAULT_VALIDATION_CONCURRENCY, (entry) =>
    digestEntry(backend, bundlePath, entry, signal),
  );
  const issues = digests.filter((result): result is BundleIssue => "code" in result);
  if (issues.length > 0) throw new BundleValidationError(issues, { bundlePath });
  const files = digests.filter((result): result is ManifestFile => !("code" in result));

  // Checking and writing a million entries takes seconds: in slices, the event loop turning.
  const manifest = await runInSlices(buildManifestSteps({ id: options.id, created, files }));
  // A manifest larger than readers accept could never be validated or published: refuse it
  // (in a dry run too) rather than write it, or replace a readable one with it under `force`.
  const text = await runInSlices(serializeManifestSteps(manifest));
  const bytes = Buffer.byteLength(text, "utf8");
  const maxBytes = manifestByteLimit(maxFiles);
  if (bytes > maxBytes) {
    throw new ManifestError(
      `${displayPath(manifestPath)} would be ${bytes} bytes for ${files.length} files, more than the ${maxBytes} a manifest of at most ${maxFiles} files may have; nothing was written`,
      { field: "files" },
    );
  }
  if (options.dryRun === true) return { manifest, manifestPath, written: false };
  try {
    await backend.writeFile(manifestPath, text, {
      overwrite: force,
      contentType: "application/json",
      signal,
    });
  } catch (error) {
    if (isStorageError(error, "already_exists"))
      throw manifestExists(bundlePath, manifestPath, error);
    throw error;
  }
  return { manifest, manifestPath, written: true };
}

async function exists(
  backend: StorageBackend,
  path: string,
  signal: AbortSignal | undefined,
): Promise<boolean> {
  try {
    await backend.stat(path, { signal });
    return true;
  } catch (error) {
    if (isStorageError(error, "not_found")) return false;
    throw error;
  }
}

function manifestExists(
  bundlePath: string,
  manifestPath: string,
  cause?: unknown,
): BundleValidationError {
  return new BundleValidationError(
    [
      {
        code: "manifest_exists",
        path: MANIFEST_FILE_NAME,
        message: `${displayPath(manifestPath)} already exists; use --force to overwrite it`,
      },
    ],
    { bundlePath, cause },
  );
}

/** The files a new manifest lists, refusing what no valid bundle may contain. */
async function listBundleFiles(
  backend: StorageBackend,
  bundlePath: string,
  maxFiles: number,
  signal: AbortSignal | undefined,
): Promise<StorageEntry[]> {
  const listing = await walkBundle(backend, bundlePath, walkLimit(maxFiles), { signal });
  const issues: BundleIssue[] = [...listing.issues];
  const files: StorageEntry[] = [];
  const clock = new SliceClock();
  for (const entry of listing.entries) {
    if (clock.due()) await clock.turn();
    if (entry.kind !== "file") continue;
    const path = relativeTo(bundlePath, entry.path);
    // A signature of an earlier manifest stays beside it unlisted; it no longer verifies.
    if (path === MANIFEST_FILE_NAME || path === SIGNATURE_FILE_NAME) continue;
    if (isNestedManifest(path)) {
      issues.push(nestedManifestIssue(path));
    } else {
      files.push(entry);
    }
  }
  if (files.length > maxFiles) {
    issues.push({
      code: "too_many_files",
      path: "",
      message: `bundle holds ${files.length} files, more than the limit ${maxFiles}`,
      expected: maxFiles,
      actual: files.length,
    });
  }
  if (issues.length === 0 && files.length === 0) {
    issues.push({ code: "empty_bundle", path: "", message: "bundle holds no files to list" });
  }
  if (issues.length > 0) throw new BundleValidationError(issues, { bundlePath });
  return files;
}

/**
 * Hashes one listed file, reading no more than the listing said it holds: a file that changes
 * size meanwhile (a producer still writing it) is refused rather than read without bound.
 */
async function digestEntry(
  backend: StorageBackend,
  bundlePath: string,
  entry: StorageEntry,
  signal: AbortSignal | undefined,
): Promise<ManifestFile | BundleIssue> {
  const path = relativeTo(bundlePath, entry.path);
  let digest: Awaited<ReturnType<typeof digestFileAtMost>>;
  try {
    digest = await digestFileAtMost(backend, entry.path, entry.size, signal);
  } catch (error) {
    const issue = fileIssue(error, path, "disappeared while the manifest was created");
    if (issue !== undefined) return issue;
    throw error;
  }
  if (digest === undefined || digest.size !== entry.size) {
    const read = digest === undefined ? `more than ${entry.size}` : digest.size;
    return {
      code: "size_mismatch",
      path,
      message: `${path}: changed while the manifest was created: listed ${entry.size} bytes, read ${read}`,
      expected: entry.size,
      actual: read,
    };
  }
  return { path, sha256: digest.sha256, size: digest.size };
}
