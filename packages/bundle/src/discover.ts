import {
  compareLogicalPaths,
  DEFAULT_LISTING_LIMIT,
  displayPath,
  joinPrefix,
  parentPath,
  relativeTo,
  SliceClock,
  type StorageBackend,
  type StorageEntry,
  validatePrefix,
} from "@distributor/storage";
import { entryIssue } from "./bundle-walk.js";
import { type BundleIssue, BundleValidationError } from "./errors.js";
import { walkRefusal } from "./file-problem.js";
import { MANIFEST_FILE_NAME } from "./manifest-checks.js";

/** Default bound on the entries a discovery walk may list under a source root. */
export const DEFAULT_DISCOVERY_LIMIT = DEFAULT_LISTING_LIMIT;

export interface DiscoverBundlesOptions {
  /** Most entries (files and directories) the walk may list; default `DEFAULT_LISTING_LIMIT` (10 million). */
  limit?: number;
  signal?: AbortSignal;
}

export interface DiscoveredBundle {
  /** Path relative to the source root; `""` when the root itself is the bundle. */
  path: string;
  /** Logical path of the bundle directory in the backend (`rootPrefix` joined with `path`). */
  bundlePath: string;
  /** Logical path of the bundle's `manifest.json` in the backend. */
  manifestPath: string;
  /**
   * What the discovery walk listed below the bundle directory (in path order), for validation to
   * use instead of walking the bundle again (`ValidateBundleOptions.listed`).
   */
  entries: StorageEntry[];
}

/**
 * Finds the bundles under `rootPrefix`: every directory holding a `manifest.json` file (docs/design/bundles.md).
 * Bundles never nest, so a manifest below another bundle fails with `nested_bundle` issues naming
 * both; an entry the backend refuses (a symlink on local storage) fails with `unsupported_entry`.
 * The walk is bounded by `limit` (a larger tree fails with the backend's `limit_exceeded`
 * `StorageError`). Results are ordered by root-relative path in byte order.
 */
export async function discoverBundles(
  backend: StorageBackend,
  rootPrefix: string,
  options: DiscoverBundlesOptions = {},
): Promise<DiscoveredBundle[]> {
  validatePrefix(rootPrefix);
  let entries: StorageEntry[];
  try {
    entries = await backend.walk(rootPrefix, {
      recursive: true,
      limit: options.limit ?? DEFAULT_DISCOVERY_LIMIT,
      signal: options.signal,
      // Discovery and validation read names, kinds and sizes only.
      bare: true,
    });
  } catch (error) {
    const refusal = walkRefusal(error, rootPrefix);
    if (refusal !== undefined) {
      throw new BundleValidationError([refusal], { bundlePath: rootPrefix, cause: error });
    }
    throw error;
  }
  // A million entries are looked at three times below: the event loop turns between slices.
  const clock = new SliceClock();
  // An entry no logical path can address might hide a bundle, so it fails discovery outright.
  const refused: BundleIssue[] = [];
  for (const entry of entries) {
    if (clock.due()) await clock.turn();
    const issue = entryIssue(entry, rootPrefix, { reserved: false });
    if (issue !== undefined) refused.push(issue);
  }
  if (refused.length > 0) throw new BundleValidationError(refused, { bundlePath: rootPrefix });
  const bundlePaths: string[] = [];
  for (const entry of entries) {
    if (clock.due()) await clock.turn();
    if (entry.kind !== "file") continue;
    const relative = relativeTo(rootPrefix, entry.path);
    if (relative === MANIFEST_FILE_NAME || relative.endsWith(`/${MANIFEST_FILE_NAME}`)) {
      bundlePaths.push(parentPath(relative));
    }
  }
  bundlePaths.sort(compareLogicalPaths);

  const issues = nestingIssues(bundlePaths);
  if (issues.length > 0) throw new BundleValidationError(issues, { bundlePath: rootPrefix });

  // Bundles never nest, so every entry lies below at most one bundle: the innermost directory
  // of its path that is a bundle.
  const byPath = new Map(
    bundlePaths.map((path) => {
      const bundlePath = joinPrefix(rootPrefix, path);
      const bundle: DiscoveredBundle = {
        path,
        bundlePath,
        manifestPath: joinPrefix(bundlePath, MANIFEST_FILE_NAME),
        entries: [],
      };
      return [path, bundle] as const;
    }),
  );
  const rootBundle = byPath.get("");
  for (const entry of entries) {
    if (clock.due()) await clock.turn();
    const relative = relativeTo(rootPrefix, entry.path);
    let owner: DiscoveredBundle | undefined;
    for (let dir = parentPath(relative); dir !== ""; dir = parentPath(dir)) {
      owner = byPath.get(dir);
      if (owner !== undefined) break;
    }
    (owner ?? rootBundle)?.entries.push(entry);
  }
  return bundlePaths.map((path) => byPath.get(path) as DiscoveredBundle);
}

/** One issue per bundle that lies inside another, naming the innermost enclosing bundle. */
function nestingIssues(bundlePaths: readonly string[]): BundleIssue[] {
  const known = new Set(bundlePaths);
  const issues: BundleIssue[] = [];
  for (const path of bundlePaths) {
    if (path === "") continue;
    for (let outer = parentPath(path); ; outer = parentPath(outer)) {
      if (known.has(outer)) {
        issues.push({
          code: "nested_bundle",
          path,
          message: `bundle ${displayPath(path)} is nested inside bundle ${displayPath(outer)} (bundles never nest)`,
        });
        break;
      }
      if (outer === "") break;
    }
  }
  return issues;
}
