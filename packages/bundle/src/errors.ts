import { displayPath } from "@distributor/storage";

/** Why a bundle (or its manifest) was refused. Operators and the CLI's JSON `error.code` use these. */
export type BundleIssueCode =
  | "invalid_manifest"
  | "missing_manifest"
  | "missing_file"
  | "not_regular_file"
  | "unsupported_entry"
  | "invalid_name"
  | "size_mismatch"
  | "sha256_mismatch"
  | "unlisted_file"
  | "nested_manifest"
  | "forbidden_file"
  | "too_many_files"
  | "total_size_exceeded"
  | "too_many_entries"
  | "nested_bundle"
  | "empty_bundle"
  | "manifest_exists"
  /** Names that are one name on case-insensitive or normalising stores (`portable_names`). */
  | "name_collision"
  /** `source.signatures` (docs/integrations/signed-bundles.md): no `manifest.json.sig` where one is required. */
  | "signature_missing"
  /** `manifest.json.sig` is no valid SSH signature of the manifest in the configured namespace. */
  | "signature_invalid"
  /** A valid signature by a key allowed_signers does not trust (now, for this namespace). */
  | "signer_not_allowed";

/** One problem found in a bundle. */
export interface BundleIssue {
  code: BundleIssueCode;
  /** Bundle-relative path of the file concerned (`manifest.json` for manifest problems). */
  path: string;
  /** Complete sentence naming the file, e.g. `report.md: size mismatch: expected 16, got 17`. */
  message: string;
  expected?: string | number;
  actual?: string | number;
}

export interface BundleValidationErrorOptions {
  /** Logical path of the bundle directory (`""` for a backend root). */
  bundlePath?: string;
  /** Overrides the summary built from the issues. */
  message?: string;
  cause?: unknown;
}

/** How many issues the summary message spells out; all of them stay in `issues`. */
const SUMMARY_ISSUES = 10;

/** A bundle failed one or more rules of docs/design/bundles.md. Every problem found is listed in `issues`. */
export class BundleValidationError extends Error {
  override name = "BundleValidationError";
  /** The issue's code when there is one issue, else `bundle_invalid`. */
  readonly code: BundleIssueCode | "bundle_invalid";
  readonly issues: readonly BundleIssue[];
  readonly bundlePath: string | undefined;

  constructor(issues: readonly BundleIssue[], options: BundleValidationErrorOptions = {}) {
    super(options.message ?? summarise(issues, options.bundlePath), { cause: options.cause });
    this.issues = issues;
    this.bundlePath = options.bundlePath;
    this.code = issues.length === 1 && issues[0] !== undefined ? issues[0].code : "bundle_invalid";
  }
}

export interface ManifestErrorOptions {
  /** The offending field, e.g. `files[2].sha256`; absent for syntax errors. */
  field?: string;
  /**
   * The issue's code: `invalid_manifest` (the default), or `empty_bundle` for a manifest that
   * lists no files, the code a bundle with nothing in it has however it is found.
   */
  code?: "invalid_manifest" | "empty_bundle";
  /** Where the manifest came from, e.g. `reports/2026/manifest.json`; prefixed to the message. */
  source?: string;
  cause?: unknown;
}

/** A manifest that is not valid JSON or breaks a rule of docs/design/bundles.md. */
export class ManifestError extends BundleValidationError {
  override name = "ManifestError";
  readonly field: string | undefined;
  readonly source: string | undefined;
  /** The problem without the source prefix. */
  readonly detail: string;

  constructor(detail: string, options: ManifestErrorOptions = {}) {
    const message = options.source === undefined ? detail : `${options.source}: ${detail}`;
    super([{ code: options.code ?? "invalid_manifest", path: "manifest.json", message }], {
      message,
      cause: options.cause,
    });
    this.field = options.field;
    this.source = options.source;
    this.detail = detail;
  }
}

function summarise(issues: readonly BundleIssue[], bundlePath: string | undefined): string {
  const subject = bundlePath === undefined ? "bundle" : `bundle ${displayPath(bundlePath)}`;
  if (issues.length === 0) return `${subject} is invalid`;
  if (issues.length === 1) return `${subject}: ${issues[0]?.message}`;
  const shown = issues.slice(0, SUMMARY_ISSUES).map((issue) => issue.message);
  const more = issues.length > SUMMARY_ISSUES ? `; and ${issues.length - SUMMARY_ISSUES} more` : "";
  return `${subject} is invalid (${issues.length} problems): ${shown.join("; ")}${more}`;
}
