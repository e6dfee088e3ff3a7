import {
  compareLogicalPaths,
  relativeTo,
  runInSlices,
  type Steps,
  type StorageBackend,
} from "@distributor/storage";
import { type BundleListing, isNestedManifest, walkBundle } from "./bundle-walk.js";
import type { BundleIssue } from "./errors.js";
import { MANIFEST_FILE_NAME, SIGNATURE_FILE_NAME } from "./manifest-checks.js";
import { STEP_FILES } from "./manifest-order.js";
import type { Manifest } from "./manifest-types.js";

/**
 * What validation keeps of the walk of a bundle, matched against its manifest: the walked size
 * of each listed file, the directories, and the files the manifest does not list. The walk's
 * entries themselves are left to the collector before the files are hashed.
 */
export interface WalkedFiles {
  /** One issue per entry no bundle may hold (symlinks, special files, odd or reserved names). */
  issues: BundleIssue[];
  /** Directories below the bundle path. */
  directories: Set<string>;
  /** The size the walk found for the manifest's file at `index`; undefined where it found none. */
  sizeAt(index: number): number | undefined;
  /**
   * Files walked that the manifest does not list, besides the manifest, its signature and
   * nested manifests.
   */
  unlisted: string[];
  /** Files walked (listed or not) named like a manifest below the bundle's root. */
  nestedManifests: string[];
}

/** Walks the bundle (or takes the caller's listing) and matches what it found with `manifest`. */
export async function walkedFiles(
  backend: StorageBackend,
  bundlePath: string,
  manifest: Manifest,
  limit: number,
  options: Parameters<typeof walkBundle>[3],
): Promise<WalkedFiles> {
  const listing = await walkBundle(backend, bundlePath, limit, options);
  return (
    (await runInSlices(matchedWalkSteps(listing, bundlePath, manifest))) ??
    (await runInSlices(indexedWalkSteps(listing, bundlePath, manifest)))
  );
}

/**
 * The match of a walk and a manifest both in byte order of path (as walks and canonical
 * manifests are), in one pass over each: no map or set of a million paths. Undefined when
 * either is not strictly increasing in that order; `indexedWalkSteps` then matches them.
 */
export function* matchedWalkSteps(
  listing: BundleListing,
  bundlePath: string,
  manifest: Manifest,
): Steps<WalkedFiles | undefined> {
  const listed = manifest.files;
  let work = 0;
  for (let index = 1; index < listed.length; index++) {
    if (++work % STEP_FILES === 0) yield;
    const before = (listed[index - 1] as Manifest["files"][number]).path;
    if (compareLogicalPaths(before, (listed[index] as Manifest["files"][number]).path) >= 0) {
      return undefined;
    }
  }
  const sizes = new Float64Array(listed.length).fill(Number.NaN);
  const found: WalkedFiles = {
    issues: listing.issues,
    directories: new Set(),
    sizeAt: (index) => {
      const size = sizes[index];
      return size === undefined || Number.isNaN(size) ? undefined : size;
    },
    unlisted: [],
    nestedManifests: [],
  };
  let next = 0;
  let previous: string | undefined;
  for (const entry of listing.entries) {
    if (++work % STEP_FILES === 0) yield;
    const path = relativeTo(bundlePath, entry.path);
    if (entry.kind !== "file") {
      found.directories.add(path);
      continue;
    }
    if (previous !== undefined && compareLogicalPaths(previous, path) >= 0) return undefined;
    previous = path;
    while (next < listed.length && compareLogicalPaths(listed[next]?.path as string, path) < 0) {
      next += 1;
      if (++work % STEP_FILES === 0) yield;
    }
    const matched = next < listed.length && listed[next]?.path === path;
    if (matched) sizes[next++] = entry.size;
    classify(found, path, matched);
  }
  return found;
}

/** The same match for a walk or a manifest in any order, through a map and a set of paths. */
export function* indexedWalkSteps(
  listing: BundleListing,
  bundlePath: string,
  manifest: Manifest,
): Steps<WalkedFiles> {
  const files = new Map<string, number>();
  const found: WalkedFiles = {
    issues: listing.issues,
    directories: new Set(),
    sizeAt: (index) => files.get(manifest.files[index]?.path as string),
    unlisted: [],
    nestedManifests: [],
  };
  for (const [index, entry] of listing.entries.entries()) {
    if (index % STEP_FILES === STEP_FILES - 1) yield;
    const path = relativeTo(bundlePath, entry.path);
    if (entry.kind === "file") files.set(path, entry.size);
    else found.directories.add(path);
  }
  const listed = new Set<string>();
  for (const [index, file] of manifest.files.entries()) {
    if (index % STEP_FILES === STEP_FILES - 1) yield;
    listed.add(file.path);
  }
  let seen = 0;
  for (const path of files.keys()) {
    if (++seen % STEP_FILES === 0) yield;
    classify(found, path, listed.has(path));
  }
  return found;
}

/** Files besides the manifest and its signature: a nested manifest, or unlisted, or neither. */
function classify(found: WalkedFiles, path: string, listed: boolean): void {
  if (path === MANIFEST_FILE_NAME || path === SIGNATURE_FILE_NAME) return;
  if (isNestedManifest(path)) found.nestedManifests.push(path);
  else if (!listed) found.unlisted.push(path);
}
