// Finding the bundles of a tree and reporting their issues: shared by validate and inspect.
import {
  type BundleIssue,
  BundleValidationError,
  discoverBundles,
  MANIFEST_FILE_NAME,
  type ValidateBundleOptions,
} from "@distributor/bundle";
import { isStorageError, type StorageBackend } from "@distributor/storage";
import type { ValidationPolicy } from "../config/types.js";

/** One problem found while validating, as reports print it. */
export interface IssueReport {
  code: string;
  /** Bundle-relative path of the file concerned (root-relative for problems of a bundle tree). */
  path: string;
  message: string;
  expected?: string | number;
  actual?: string | number;
}

/** Limits and unlisted-file policy a validation applies (a pipeline's `validation` block). */
export type ValidationRules = Pick<
  ValidateBundleOptions,
  "unlistedFiles" | "maxFiles" | "maxTotalSize" | "portableNames" | "signatures"
>;

export function validationRules(policy: ValidationPolicy): ValidationRules {
  return {
    unlistedFiles: policy.unlistedFiles,
    maxFiles: policy.maxFiles,
    maxTotalSize: policy.maxTotalSize,
    portableNames: policy.portableNames ? "refuse" : "warn",
  };
}

/** Per-bundle reports of a tree, and whether the tree as a whole passed. */
export interface CheckedBundles<Report extends { ok: boolean }> {
  /** True when at least one bundle was found and every bundle passed. */
  ok: boolean;
  /** Problems of the tree itself: nested bundles, no bundle found. */
  issues: IssueReport[];
  bundles: Report[];
}

/**
 * Runs `check` on the bundle at `bundlePath`, or on every bundle discovered in the backend when it
 * is undefined, one after another. Discovery problems become tree issues; storage failures
 * propagate.
 */
export async function checkBundles<Report extends { ok: boolean }>(
  backend: StorageBackend,
  bundlePath: string | undefined,
  signal: AbortSignal | undefined,
  check: (bundlePath: string) => Promise<Report>,
): Promise<CheckedBundles<Report>> {
  const found = await bundlePaths(backend, bundlePath, signal);
  const bundles: Report[] = [];
  for (const path of found.paths) bundles.push(await check(path));
  const ok =
    found.issues.length === 0 && bundles.length > 0 && bundles.every((bundle) => bundle.ok);
  return { ok, issues: found.issues, bundles };
}

/** The bundle paths to check, or the problems that prevent finding them. */
async function bundlePaths(
  backend: StorageBackend,
  bundlePath: string | undefined,
  signal: AbortSignal | undefined,
): Promise<{ paths: string[]; issues: IssueReport[] }> {
  if (bundlePath !== undefined) return { paths: [bundlePath], issues: [] };
  // Bundles never nest: a root bundle is the only one, and validating it reports anything below.
  if (await isFile(backend, MANIFEST_FILE_NAME, signal)) return { paths: [""], issues: [] };
  let discovered: Awaited<ReturnType<typeof discoverBundles>>;
  try {
    discovered = await discoverBundles(backend, "", { signal });
  } catch (error) {
    if (error instanceof BundleValidationError)
      return { paths: [], issues: issueReports(error.issues) };
    throw error;
  }
  if (discovered.length === 0) {
    return {
      paths: [],
      issues: [
        {
          code: "no_bundles",
          path: "",
          message: `no bundle found in ${backend.location} (no directory holds a manifest.json)`,
        },
      ],
    };
  }
  return { paths: discovered.map((bundle) => bundle.path), issues: [] };
}

export function issueReports(issues: readonly BundleIssue[]): IssueReport[] {
  return issues.map((issue) => {
    const report: IssueReport = { code: issue.code, path: issue.path, message: issue.message };
    if (issue.expected !== undefined) report.expected = issue.expected;
    if (issue.actual !== undefined) report.actual = issue.actual;
    return report;
  });
}

/** True when `path` exists as a regular file. */
export async function isFile(
  backend: StorageBackend,
  path: string,
  signal: AbortSignal | undefined,
): Promise<boolean> {
  try {
    const entry = await backend.stat(path, { signal });
    return entry.kind === "file";
  } catch (error) {
    if (isStorageError(error, "not_found")) return false;
    throw error;
  }
}
