import {
  compareLogicalPaths,
  fanOutSignal,
  joinPrefix,
  mapBounded,
  parentPath,
  runInSlices,
  type Steps,
  type StorageBackend,
  type StorageEntry,
} from "@distributor/storage";
import { nestedManifestIssue, walkLimit } from "./bundle-walk.js";
import { digestFileAtMost } from "./digest.js";
import { type BundleIssue, BundleValidationError } from "./errors.js";
import { fileIssue } from "./file-problem.js";
import { MANIFEST_FILE_NAME } from "./manifest-checks.js";
import { STEP_FILES } from "./manifest-order.js";
import type { Manifest, ManifestFile } from "./manifest-types.js";
import {
  describeNameCollision,
  type NameCollision,
  nameCollisions,
  nameCollisionsSteps,
} from "./portable-names.js";
import { readManifest } from "./read-manifest.js";
import { type BundleSigner, readSignedManifest, type SignaturePolicy } from "./signature/verify.js";
import { type WalkedFiles, walkedFiles } from "./walked-files.js";

export type UnlistedFilesPolicy = "reject" | "ignore";

/** Defaults of the pipeline's `validation` block (docs/design/bundles.md, docs/config.md). */
export const DEFAULT_MAX_FILES = 10_000;
export const DEFAULT_MAX_TOTAL_SIZE = 10_000_000_000;
/** Files hashed at once: enough to hide remote round trips, few enough to keep memory flat. */
export const DEFAULT_VALIDATION_CONCURRENCY = 4;

export interface ValidateBundleOptions {
  /** `validation.unlisted_files`; default `reject`. */
  unlistedFiles?: UnlistedFilesPolicy;
  /**
   * Listed names that collide on case-insensitive or normalising stores (`nameCollisions`):
   * reported as `warnings` (default) or, with `refuse`, as issues that fail validation.
   */
  portableNames?: "warn" | "refuse";
  /** `validation.max_files`; default 10000. */
  maxFiles?: number;
  /**
   * How messages name `maxFiles` and say how to raise it. Default: the pipeline's
   * `validation.max_files`, raised in its configuration. A producer's client names its own
   * setting instead: the pipeline's configuration is not the producer's to see.
   */
  maxFilesSetting?: MaxFilesSetting;
  /** `validation.max_total_size` in bytes; default 10 GB. */
  maxTotalSize?: number;
  /** Files hashed concurrently; default 4. */
  concurrency?: number;
  signal?: AbortSignal;
  /**
   * The manifest as the caller already read it (with `readManifest`), checked instead of reading
   * `manifest.json` again.
   */
  manifest?: Manifest;
  /**
   * `source.signatures`: the manifest is read with its signature and checked under this policy
   * first (`readSignedManifest`). Not with `manifest`: a caller that read the manifest checks its
   * signature as it reads it.
   */
  signatures?: SignaturePolicy;
  /**
   * Every entry below the bundle path, from a recursive walk the caller already made (discovery
   * makes one): the bundle is not walked again.
   */
  listed?: readonly StorageEntry[];
  /** Called after each listed file has been checked, for progress displays. */
  onFile?: (progress: FileCheckProgress) => void;
}

/** A name for the file limit in messages, and the advice that raises it. */
export interface MaxFilesSetting {
  /** E.g. `validation.max_files` or `--max-files`. */
  name: string;
  /** What to do to accept more files, e.g. `set validation.max_files in the pipeline's configuration to accept more`. */
  raise: string;
}

const PIPELINE_MAX_FILES: MaxFilesSetting = {
  name: "validation.max_files",
  raise: "set validation.max_files in the pipeline's configuration to accept more",
};

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
  /** Problems that do not fail validation: names that collide on other stores. */
  warnings: BundleIssue[];
  /** Who signed the manifest, when `signatures` was given and the bundle is signed. */
  signer?: BundleSigner;
}

/**
 * Checks a bundle against docs/design/bundles.md before anything is published: the manifest parses and respects
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
  const setting = options.maxFilesSetting ?? PIPELINE_MAX_FILES;

  if (options.manifest !== undefined && options.signatures !== undefined) {
    throw new TypeError(
      "validateBundle: pass signatures or a manifest read with its signature, not both",
    );
  }
  let signer: BundleSigner | undefined;
  let manifest: Manifest;
  if (options.manifest !== undefined) manifest = options.manifest;
  else if (options.signatures === undefined) {
    manifest = await readManifest(backend, bundlePath, {
      signal,
      maxFiles,
      maxFilesName: setting.name,
    });
  } else {
    ({ manifest, signer } = await readSignedManifest(backend, bundlePath, options.signatures, {
      signal,
      maxFiles,
      maxFilesName: setting.name,
    }));
  }
  const totalSize = checkDeclaredLimits(manifest, bundlePath, { maxFiles, setting }, maxTotalSize);

  // The loops over every file below run in slices: at a million files each is seconds of work.
  const walkBound = await runInSlices(bundleWalkLimitSteps(manifest, maxFiles));
  const walked = await walkedFiles(backend, bundlePath, manifest, walkBound, {
    signal,
    limitNote: `${setting.name} is ${maxFiles}`,
    listed: options.listed,
  });

  // Entries no bundle may hold fail whatever `unlisted_files` says: they are not files to ignore.
  const issues: BundleIssue[] = [...walked.issues];
  const unlistedFiles: string[] = [];
  await runInSlices(unlistedSteps(walked, unlistedPolicy, issues, unlistedFiles));

  const count = manifest.files.length;
  const scope = fanOutSignal(signal, concurrency);
  let fileIssues: (BundleIssue | undefined)[];
  try {
    fileIssues = await mapBounded(manifest.files, concurrency, async (file, index) => {
      const problem = await checkListedFile(
        backend,
        bundlePath,
        file,
        walked.sizeAt(index),
        walked.directories,
        scope.signal,
      );
      options.onFile?.({
        path: file.path,
        size: file.size,
        index,
        count,
        ok: problem === undefined,
      });
      return problem;
    });
  } finally {
    scope.dispose();
  }
  // A listed file the listing already refused (a symlink) is reported once, by the listing.
  const refused = new Set(walked.issues.map((issue) => issue.path));
  for (const issue of fileIssues) {
    if (issue !== undefined && !refused.has(issue.path)) issues.push(issue);
  }

  const collisions = nameCollisionIssues(
    manifest,
    await runInSlices(nameCollisionsSteps(manifest.files.map((file) => file.path))),
  );
  const warnings: BundleIssue[] = [];
  if (options.portableNames === "refuse") issues.push(...collisions);
  else warnings.push(...collisions);

  if (issues.length > 0) {
    issues.sort((a, b) => compareLogicalPaths(a.path, b.path));
    throw new BundleValidationError(issues, { bundlePath });
  }
  unlistedFiles.sort(compareLogicalPaths);
  const validated: ValidatedBundle = {
    path: bundlePath,
    manifest,
    totalSize,
    unlistedFiles,
    warnings,
  };
  if (signer !== undefined) validated.signer = signer;
  return validated;
}

/**
 * One `name_collision` issue per group of listed names that are one name on some stores
 * (`collisions`, when the caller found them already).
 */
export function nameCollisionIssues(
  manifest: Manifest,
  collisions: readonly NameCollision[] = nameCollisions(manifest.files.map((file) => file.path)),
): BundleIssue[] {
  return collisions.map((collision) => ({
    code: "name_collision",
    path: collision.paths[0] ?? "",
    message: describeNameCollision(collision),
  }));
}

export function checkLimit(name: string, value: number, minimum: number): number {
  if (!Number.isSafeInteger(value) || value < minimum) {
    throw new RangeError(`${name} must be an integer of at least ${minimum}, got ${String(value)}`);
  }
  return value;
}

/** Refuses, before reading any file, a manifest that declares more than the limits allow. */
function checkDeclaredLimits(
  manifest: Manifest,
  bundlePath: string,
  { maxFiles, setting }: { maxFiles: number; setting: MaxFilesSetting },
  maxTotalSize: number,
): number {
  const issues: BundleIssue[] = [];
  const count = manifest.files.length;
  if (count > maxFiles) {
    issues.push({
      code: "too_many_files",
      path: MANIFEST_FILE_NAME,
      message: `${MANIFEST_FILE_NAME}: lists ${count} files, more than ${setting.name} ${maxFiles}; ${setting.raise}`,
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
 * How many entries the one walk of the bundle may list: everything a valid bundle holds (its
 * listed files, their directories and the manifest) plus room for its signature and strays to report, and never
 * less than `walkLimit(maxFiles)`. Bounded by the manifest, which is itself bounded.
 */
function* bundleWalkLimitSteps(manifest: Manifest, maxFiles: number): Steps<number> {
  const directories = new Set<string>();
  for (const [index, file] of manifest.files.entries()) {
    if (index % STEP_FILES === STEP_FILES - 1) yield;
    for (let parent = parentPath(file.path); parent !== ""; parent = parentPath(parent)) {
      if (directories.has(parent)) break;
      directories.add(parent);
    }
  }
  const needed = manifest.files.length + directories.size + 1;
  return Math.max(walkLimit(maxFiles), needed + 64);
}

/**
 * Files present but not listed: reported in `issues`, or gathered in `unlistedFiles` when the
 * policy ignores them; nested manifests are always issues.
 */
function* unlistedSteps(
  walked: WalkedFiles,
  policy: UnlistedFilesPolicy,
  issues: BundleIssue[],
  unlistedFiles: string[],
): Steps<void> {
  for (const [index, path] of walked.nestedManifests.entries()) {
    if (index % STEP_FILES === STEP_FILES - 1) yield;
    issues.push(nestedManifestIssue(path));
  }
  for (const [index, path] of walked.unlisted.entries()) {
    if (index % STEP_FILES === STEP_FILES - 1) yield;
    if (policy === "ignore") unlistedFiles.push(path);
    else {
      issues.push({
        code: "unlisted_file",
        path,
        message: `${path}: present but not listed in ${MANIFEST_FILE_NAME}`,
      });
    }
  }
}

async function checkListedFile(
  backend: StorageBackend,
  bundlePath: string,
  file: ManifestFile,
  /** The size the walk found at the file's path; undefined where it found no file there. */
  size: number | undefined,
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
  if (size === undefined) {
    // Not walked: missing, or something the walk does not list as a file (a symlink). Ask.
    const problem = await statProblem(backend, fullPath, path, signal);
    if (problem !== undefined) return problem;
  } else if (size !== file.size) {
    return sizeMismatch(path, file.size, size);
  }

  let digest: Awaited<ReturnType<typeof digestFileAtMost>>;
  try {
    digest = await digestFileAtMost(backend, fullPath, file.size, signal);
  } catch (error) {
    const problem = missingOrIrregular(error, path);
    if (problem !== undefined) return problem;
    throw error;
  }
  if (digest === undefined) {
    return sizeMismatch(path, file.size, `more than ${file.size} (file grew while reading)`);
  }
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
    const entry = await backend.stat(fullPath, { signal });
    if (entry.kind !== "file") {
      return {
        code: "not_regular_file",
        path,
        message: `${path}: is a ${entry.kind}, not a regular file`,
      };
    }
    return undefined;
  } catch (error) {
    const problem = missingOrIrregular(error, path);
    if (problem !== undefined) return problem;
    throw error;
  }
}

function missingOrIrregular(error: unknown, path: string): BundleIssue | undefined {
  return fileIssue(error, path, `listed in ${MANIFEST_FILE_NAME} but missing`);
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
