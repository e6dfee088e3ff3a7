import {
  BundleValidationError,
  formatTimestamp,
  type Manifest,
  readManifest,
  validateBundle,
} from "@distributor/bundle";
import { displayPath, type StorageBackend } from "@distributor/storage";
import { openConfiguredSource } from "../backends/configured-location.js";
import { openLocalDirectory } from "../backends/local-directory.js";
import { withBackend } from "../backends/registry.js";
import type { Config, PipelineConfig } from "../config/types.js";
import { noBundlesError } from "../shared/no-bundles.js";
import type { WorkflowOptions } from "../shared/workflow-options.js";
import {
  type CheckedBundles,
  checkBundles,
  type IssueReport,
  issueReports,
  type ValidationRules,
  validationRules,
} from "./bundle-checks.js";
import { allowedSignersPolicy, signaturePolicy } from "./signatures.js";

/** The validation of one bundle. Manifest fields are null when the manifest itself is unusable. */
export interface BundleValidationReport {
  /** Path of the bundle relative to the validated root; `.` for the root itself. */
  path: string;
  ok: boolean;
  id: string | null;
  digest: string | null;
  /** RFC 3339, UTC. */
  created: string | null;
  /** Number of files the manifest lists. */
  files: number | null;
  /** Sum of the listed file sizes in bytes. */
  total_size: number | null;
  /** Files present but not listed, tolerated by `validation.unlisted_files: ignore`. */
  unlisted_files: string[];
  issues: IssueReport[];
  /**
   * Problems that do not fail validation: names that are one name on case-insensitive or
   * normalising stores (`name_collision`), unless `validation.portable_names` refuses them.
   */
  warnings: IssueReport[];
}

/** Result of `validateBundlePath` and `validateConfiguredSource`; the CLI prints it as JSON. */
export interface ValidateReport {
  /** True when at least one bundle was found and every bundle is valid. */
  ok: boolean;
  /** The backend location validated, e.g. `local:/srv/spool`. */
  location: string;
  /** Set when the source came from a configured pipeline. */
  pipeline_id?: string;
  /** Problems of the tree itself: nested bundles, no bundle found. */
  issues: IssueReport[];
  bundles: BundleValidationReport[];
}

/** Progress of a validation, for displays. */
export type ValidateEvent =
  | { type: "bundle_started"; bundle_path: string }
  | {
      type: "file_checked";
      bundle_path: string;
      path: string;
      size: number;
      index: number;
      count: number;
      ok: boolean;
    }
  | { type: "bundle_checked"; bundle_path: string; ok: boolean };

export interface ValidateBundlePathOptions extends WorkflowOptions<ValidateEvent> {
  /** A local bundle directory, or a directory holding bundles below it. */
  path: string;
  /**
   * Check each bundle's `manifest.json.sig` against this allowed_signers file (in `namespace`,
   * default `distributor`); a bundle without one is refused (`signature_missing`).
   */
  signatures?: { allowedSigners: string; namespace?: string | undefined } | undefined;
}

export interface ValidateConfiguredSourceOptions extends WorkflowOptions<ValidateEvent> {
  config: Config;
  pipelineId: string;
  /** Only the bundle at this path relative to the source root; default every bundle. */
  bundlePath?: string;
}

/**
 * Validates the bundles under a local directory with the default validation rules: the directory
 * itself when it holds `manifest.json`, else every bundle discovered below it.
 */
export async function validateBundlePath(
  options: ValidateBundlePathOptions,
): Promise<ValidateReport> {
  const signatures =
    options.signatures === undefined
      ? undefined
      : await allowedSignersPolicy({ ...options.signatures, required: true }, options);
  const backend = await openLocalDirectory(options.path);
  return withBackend(backend, async () => {
    const rules = signatures === undefined ? {} : { signatures };
    const checked = await validateBundles(backend, undefined, rules, options);
    return {
      ok: checked.ok,
      location: backend.location,
      issues: checked.issues,
      bundles: checked.bundles,
    };
  });
}

/**
 * Validates the source bundles of a configured pipeline, or only the one at `bundlePath`, with the
 * pipeline's validation policy.
 */
export async function validateConfiguredSource(
  options: ValidateConfiguredSourceOptions,
): Promise<ValidateReport> {
  const { pipeline, prefix, backend } = await openConfiguredSource(options);
  return withBackend(backend, async () => {
    const signatures = await signaturePolicy(pipeline, options);
    const checked = await validateBundles(
      backend,
      prefix,
      { ...validationRules(pipeline.validation), ...(signatures ? { signatures } : {}) },
      options,
    );
    return {
      ok: checked.ok,
      location: backend.location,
      pipeline_id: pipeline.id,
      issues: await sourceIssues(pipeline, backend, checked.issues),
      bundles: checked.bundles,
    };
  });
}

/** The tree issues of a pipeline's source, where no bundle was found because it does not exist. */
async function sourceIssues(
  pipeline: PipelineConfig,
  backend: StorageBackend,
  issues: IssueReport[],
): Promise<IssueReport[]> {
  if (!issues.some((issue) => issue.code === "no_bundles")) return issues;
  const error = await noBundlesError(pipeline, backend);
  if (error.code !== "source_not_found") return issues;
  return [{ code: error.code, path: "", message: error.message }];
}

/** Validates the bundle at `bundlePath`, or every bundle discovered in the backend. */
function validateBundles(
  backend: StorageBackend,
  bundlePath: string | undefined,
  rules: ValidationRules,
  options: Pick<WorkflowOptions<ValidateEvent>, "signal" | "onEvent">,
): Promise<CheckedBundles<BundleValidationReport>> {
  return checkBundles(backend, bundlePath, options.signal, (path) =>
    validateOne(backend, path, rules, options),
  );
}

async function validateOne(
  backend: StorageBackend,
  bundlePath: string,
  rules: ValidationRules,
  options: Pick<WorkflowOptions<ValidateEvent>, "signal" | "onEvent">,
): Promise<BundleValidationReport> {
  const { signal, onEvent } = options;
  onEvent?.({ type: "bundle_started", bundle_path: bundlePath });
  let manifest: Manifest | undefined;
  let report: BundleValidationReport;
  try {
    // Read first so a bundle whose files fail still reports which manifest it was checked against.
    manifest = await readManifest(backend, bundlePath, { signal, maxFiles: rules.maxFiles });
    const validated = await validateBundle(backend, bundlePath, {
      ...rules,
      // Read once: a signed manifest is read again with its signature, checked as it is read.
      ...(rules.signatures === undefined ? { manifest } : {}),
      signal,
      onFile: (progress) =>
        onEvent?.({ type: "file_checked", bundle_path: bundlePath, ...progress }),
    });
    report = bundleReport(bundlePath, validated.manifest, [], validated.unlistedFiles);
    report.warnings = issueReports(validated.warnings);
  } catch (error) {
    if (!(error instanceof BundleValidationError)) throw error;
    report = bundleReport(bundlePath, manifest, issueReports(error.issues), []);
  }
  onEvent?.({ type: "bundle_checked", bundle_path: bundlePath, ok: report.ok });
  return report;
}

function bundleReport(
  bundlePath: string,
  manifest: Manifest | undefined,
  issues: IssueReport[],
  unlistedFiles: string[],
): BundleValidationReport {
  return {
    path: displayPath(bundlePath),
    ok: issues.length === 0,
    id: manifest?.id ?? null,
    digest: manifest?.digest ?? null,
    created: manifest === undefined ? null : formatTimestamp(manifest.created),
    files: manifest?.files.length ?? null,
    total_size:
      manifest === undefined ? null : manifest.files.reduce((sum, file) => sum + file.size, 0),
    unlisted_files: unlistedFiles,
    issues,
    warnings: [],
  };
}
