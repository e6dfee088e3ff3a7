// Error classes are recognised by name: errors can cross package copies (a library user may
// bundle another copy of @distributor/storage), where instanceof would fail.
const CODES_BY_NAME: Readonly<Record<string, string>> = {
  AbortError: "aborted",
  BundleValidationError: "bundle_invalid",
  ConfigError: "config_invalid",
  ManifestError: "manifest_invalid",
  PublishPlanError: "plan_failed",
  PublishExecutionError: "publish_failed",
  SourceChangedError: "source_changed",
  StateError: "state_invalid",
};

const CODE_PATTERN = /^[a-z][a-z0-9_]*$/;

/** The machine-readable code of a failure (`storage_not_found`, `bundle_invalid`, ...). */
export function errorCode(error: unknown): string {
  if (!(error instanceof Error)) return "failed";
  if (error.name === "StorageError") {
    const kind = (error as { kind?: unknown }).kind;
    return typeof kind === "string" ? `storage_${kind}` : "storage_failed";
  }
  // A failure before the commit is reported by what caused it (a timeout, a lost lease, ...).
  if (error.name === "UncommittedError" && error.cause !== undefined) return errorCode(error.cause);
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
