// Workflow-level errors and the codes by which every failure is reported (the CLI's `error.code`).
import type { BundleIssueCode } from "@distributor/bundle";
import type { PruneReport } from "./maintenance/prune/types.js";

// Error classes are recognised by name: errors can cross package copies (a library user may
// bundle another copy of @distributor/storage), where instanceof would fail.
const CODES_BY_NAME: Readonly<Record<string, string>> = {
  AbortError: "aborted",
  BundleValidationError: "bundle_invalid",
  ConfigError: "config_invalid",
  ManifestError: "manifest_invalid",
  PublishPlanError: "plan_failed",
  PublishExecutionError: "publish_failed",
  SigningError: "signing_failed",
  SourceChangedError: "source_changed",
  StateError: "state_invalid",
};

const CODE_PATTERN = /^[a-z][a-z0-9_]*$/;

/** The codes a refused signature carries (docs/integrations/signed-bundles.md). */
export const SIGNATURE_CODES: ReadonlySet<BundleIssueCode | "bundle_invalid"> = new Set([
  "signature_missing",
  "signature_invalid",
  "signer_not_allowed",
]);

/**
 * Issue codes a refused bundle is reported by wherever it is refused (validate, run, serve,
 * upload, manifest create), not folded into `bundle_invalid` or `manifest_invalid`: a refused
 * signature, so that scripts tell an untrusted producer from a bad bundle, and a bundle with no
 * files, however that was found (an empty directory, a manifest listing nothing).
 */
const OWN_BUNDLE_CODES: ReadonlySet<string> = new Set([...SIGNATURE_CODES, "empty_bundle"]);

const BUNDLE_ERROR_NAMES: ReadonlySet<string> = new Set(["BundleValidationError", "ManifestError"]);

/** The code of a refused bundle that keeps its own (`empty_bundle`, a signature's), else undefined. */
export function ownBundleCode(error: unknown): string | undefined {
  if (!(error instanceof Error) || !BUNDLE_ERROR_NAMES.has(error.name)) return undefined;
  const code = (error as { code?: unknown }).code;
  return typeof code === "string" && OWN_BUNDLE_CODES.has(code) ? code : undefined;
}

/** The code of a refused bundle: its own where it keeps one, else `bundle_invalid`. */
export function bundleRefusalCode(error: unknown): string {
  return ownBundleCode(error) ?? "bundle_invalid";
}

/** The machine-readable code of a failure (`storage_not_found`, `bundle_invalid`, ...). */
export function errorCode(error: unknown): string {
  if (!(error instanceof Error)) return "failed";
  if (error.name === "StorageError") {
    const kind = (error as { kind?: unknown }).kind;
    return typeof kind === "string" ? `storage_${kind}` : "storage_failed";
  }
  // A failure before the commit is reported by what caused it (a timeout, a lost lease, ...).
  if (error.name === "UncommittedError" && error.cause !== undefined) return errorCode(error.cause);
  const ownCode = ownBundleCode(error);
  if (ownCode !== undefined) return ownCode;
  const byName = CODES_BY_NAME[error.name];
  if (byName !== undefined) return byName;
  // Workflow errors carry their own snake_case code; Node system codes (ENOENT) do not match.
  const code = (error as { code?: unknown }).code;
  if (typeof code === "string" && CODE_PATTERN.test(code)) return code;
  return "failed";
}

/** The human message of a failure. */
export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** A failed destination action's error in a run report: a documented code and the message. */
export interface ActionError {
  code: string;
  message: string;
}

// Operating-system causes that say more than the storage kind wrapping them (a full disk and a
// read-only mount both surface as a failed write).
const CODES_BY_ERRNO: Readonly<Record<string, string>> = {
  EACCES: "permission_denied",
  EPERM: "permission_denied",
  ENOSPC: "no_space",
  EDQUOT: "no_space",
  EROFS: "read_only",
  ETIMEDOUT: "timeout",
  TimeoutError: "timeout",
};

const CODES_BY_KIND: Readonly<Record<string, string>> = {
  permission: "permission_denied",
};

/**
 * The code of a failed destination action (`run` reports, docs/cli.md): one vocabulary, documented
 * in docs/cli.md, so scripts branch on it instead of on messages. Domain failures keep their
 * own code (`lease_held`, `commit_unknown`, `source_changed`, ...); a storage failure is named by
 * its operating-system cause where one is known (`no_space`, `read_only`, `permission_denied`,
 * `timeout`), else by its kind (`not_found`, `conflict`, `unavailable`, ...). The command's
 * envelope code is decided separately (`errorCode`).
 */
export function actionErrorCode(error: unknown): string {
  if (!(error instanceof Error)) return "failed";
  if (error.name === "AbortError") return "aborted";
  // A failure before the commit is reported by what caused it.
  if (error.name === "UncommittedError" && error.cause !== undefined) {
    return actionErrorCode(error.cause);
  }
  if (error.name === "StorageError") {
    // A write that failed because its source did (a file changed, an interrupt) is that failure.
    const inner = error.cause;
    if (inner instanceof Error && inner.name !== "StorageError" && errorCode(inner) !== "failed") {
      return actionErrorCode(inner);
    }
    const cause = errnoCode(error);
    if (cause !== undefined) return cause;
    const kind = String((error as { kind?: unknown }).kind);
    // Adapters report a request that timed out as `unavailable` with these words.
    if (kind === "unavailable" && /\btimed out\b/.test(error.message)) return "timeout";
    return CODES_BY_KIND[kind] ?? kind;
  }
  const code = errorCode(error);
  if (code !== "failed") return code;
  return errnoCode(error) ?? "failed";
}

/** The `error` of a failed destination action. */
export function actionError(error: unknown): ActionError {
  return { code: actionErrorCode(error), message: errorMessage(error) };
}

/** The first operating-system code along the cause chain that names a failure we document. */
function errnoCode(error: unknown): string | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 8 && current instanceof Error; depth++) {
    const code = (current as { code?: unknown }).code;
    const byCode = typeof code === "string" ? CODES_BY_ERRNO[code] : undefined;
    if (byCode !== undefined) return byCode;
    if (current.name === "TimeoutError") return "timeout";
    current = current.cause;
  }
  return undefined;
}

/**
 * A workflow failure that is neither a storage nor a bundle nor a config problem, e.g. an unknown
 * pipeline id. `code` is the snake_case `error.code` of the CLI's JSON envelope.
 */
export class WorkflowError extends Error {
  override readonly name = "WorkflowError";
  readonly code: string;

  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

/**
 * A destination a saved plan may no longer be carried out at: `code` is `plan_stale` (the
 * destination moved on), `source_changed` (the bundle is no longer the one planned) or
 * `config_changed` (the pipeline or destination is configured differently, or gone).
 */
export class PlanRefusedError extends Error {
  override readonly name = "PlanRefusedError";
  readonly code: string;

  constructor(code: string, message: string) {
    super(message);
    this.code = code;
  }
}

/** A plan file that cannot be read, is not a plan, or has a format this version does not read. */
export class PlanFileError extends Error {
  override readonly name = "PlanFileError";
  readonly code: string;

  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

/**
 * A prune that stopped part-way: the state rewrite or a delete after it failed, or the run was
 * aborted. `report` says whether the state changed, what was deleted (and `failed_output`).
 * Outputs the new state no longer records but that are still there stay journaled with the
 * (abandoned) lease, so the next run at that destination removes them. `code` is the code of
 * the underlying failure.
 */
export class PruneError extends Error {
  override readonly name = "PruneError";
  readonly code: string;
  readonly report: PruneReport;

  constructor(report: PruneReport, cause: unknown, message = errorMessage(cause)) {
    super(message, { cause });
    this.code = errorCode(rootCause(cause));
    this.report = report;
  }
}

/** The failure below the protocol's wrappers: what the operator has to act on. */
function rootCause(error: unknown): unknown {
  let current = error;
  while (
    current instanceof Error &&
    current.cause !== undefined &&
    ["UncommittedError", "PendingDeletesError", "AmbiguousCommitError"].includes(current.name)
  ) {
    current = current.cause;
  }
  return current;
}

/** True for a `PruneError`, recognised by name so that it survives package copies. */
export function isPruneError(error: unknown): error is PruneError {
  return error instanceof Error && error.name === "PruneError" && "report" in error;
}
