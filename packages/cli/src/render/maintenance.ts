import type {
  AdoptReport,
  PruneReport,
  ReconcileStateReport,
  RollbackReport,
} from "@distributor/publish";

/** Outcome of a destination maintenance command, as its text summary shows it. */
export type MaintenanceStatus = "changed" | "would_change" | "unchanged";

/** Outcome of a prune: also `disabled` when the destination's policy is off and nothing was looked at. */
export type PruneStatus = MaintenanceStatus | "disabled";

/** `changed` when state was rewritten, `would_change` when a dry run found work, else `unchanged`. */
export function reconcileStateStatus(report: ReconcileStateReport): MaintenanceStatus {
  return maintenanceStatus(report.changed, report.would_change);
}

/**
 * `disabled` when `retention.prune.enabled` is false, else `changed` when state was rewritten,
 * `would_change` when a dry run planned deletes, else `unchanged`.
 */
export function pruneStatus(report: PruneReport): PruneStatus {
  if (!report.enabled) return "disabled";
  return maintenanceStatus(report.state_changed, report.would_change);
}

/**
 * The one summary line of a `reconcile-state` report (no trailing newline). Values are printed
 * as they are, so operators' scripts written for the earlier implementation keep matching.
 */
export function formatReconcileStateText(report: ReconcileStateReport): string {
  return (
    `Reconcile state: pipeline=${report.pipeline_id} destination=${report.destination_id}` +
    ` backend=${report.backend} root=${report.root_path} status=${reconcileStateStatus(report)}` +
    ` checked=${report.checked_count} missing=${report.missing_managed_outputs.length}` +
    ` unmanaged=${report.unmanaged_entries.length} dry_run=${report.dry_run}` +
    // The reference's line, and the bundle path after it when it is not the root.
    (report.bundle_path === undefined ? "" : ` bundle=${report.bundle_path}`)
  );
}

/**
 * One line per bundle path of a `reconcile-state --adopt|--rebuild` report (no trailing
 * newlines); `status` is `changed`, `would_change`, `unchanged` or `refused`.
 */
export function formatAdoptText(report: AdoptReport): string[] {
  return report.bundles.map((bundle) => {
    const status =
      bundle.error !== null ? "refused" : maintenanceStatus(bundle.changed, bundle.would_change);
    return (
      `Reconcile state: pipeline=${report.pipeline_id} destination=${report.destination_id}` +
      ` backend=${report.backend} root=${report.root_path} mode=${report.mode}` +
      ` bundle=${bundle.bundle_path} status=${status} adopted=${bundle.adopted_outputs.length}` +
      ` managed=${bundle.managed_count} unmatched=${bundle.unmatched_outputs.length}` +
      ` unmanaged=${bundle.unmanaged_entries.length} dry_run=${report.dry_run}`
    );
  });
}

/**
 * The summary line of a `prune` report (no trailing newline). Pruning outputs of a root state
 * prints the reference line; pruning whole bundle paths says `unit=bundles`, counts bundles, and
 * adds the output counts.
 */
export function formatPruneText(report: PruneReport): string {
  const head =
    `Prune: pipeline=${report.pipeline_id} destination=${report.destination_id}` +
    ` backend=${report.backend} root=${report.root_path} status=${pruneStatus(report)}`;
  if (report.unit === "bundles") {
    return (
      `${head} unit=bundles checked=${report.checked_count}` +
      ` planned=${report.planned_bundles.length} deleted=${report.deleted_bundles.length}` +
      ` preserved=${report.preserved_bundles.length}` +
      ` planned_outputs=${report.planned_outputs.length}` +
      ` deleted_outputs=${report.deleted_outputs.length} dry_run=${report.dry_run}`
    );
  }
  return (
    `${head} checked=${report.checked_count} planned=${report.planned_outputs.length}` +
    ` deleted=${report.deleted_outputs.length} preserved=${report.preserved_outputs.length}` +
    ` dry_run=${report.dry_run}`
  );
}

/**
 * One line per planned bundle path of a prune across bundle paths, oldest first (none for a
 * root state): `status=deleted` once pruned, `failed` for the one that stopped the prune,
 * `planned` otherwise (a dry run, or not reached).
 */
export function formatPruneBundleLines(report: PruneReport): string[] {
  const deleted = new Set(report.deleted_bundles.map((bundle) => bundle.bundle_path));
  const kept = new Set(report.preserved_bundles.map((bundle) => bundle.bundle_path));
  return report.planned_bundles.map((bundle) => {
    const status = deleted.has(bundle.bundle_path)
      ? "deleted"
      : report.failed_bundle?.bundle_path === bundle.bundle_path
        ? "failed"
        : kept.has(bundle.bundle_path)
          ? "preserved"
          : "planned";
    return (
      `Prune bundle: pipeline=${report.pipeline_id} destination=${report.destination_id}` +
      ` bundle=${bundle.bundle_path} created=${bundle.created} published_at=${bundle.published_at ?? "-"}` +
      ` outputs=${bundle.output_count} removes_state=${bundle.removes_state} status=${status}`
    );
  });
}

function maintenanceStatus(changed: boolean, wouldChange: boolean): MaintenanceStatus {
  if (changed) return "changed";
  return wouldChange ? "would_change" : "unchanged";
}

/** The one summary line of a `rollback` report (no trailing newline). */
export function formatRollbackText(report: RollbackReport, title = "Rollback"): string {
  const status = report.switched ? "switched" : report.dry_run ? "would_switch" : "unchanged";
  const { check } = report;
  const line =
    `${title}: pipeline=${report.pipeline_id} destination=${report.destination_id}` +
    ` bundle=${report.bundle_path} from=${report.from ?? "-"} to=${report.to} status=${status}` +
    ` checked=${check.method} switch_ms=${report.switch_ms} dry_run=${report.dry_run}` +
    (report.forced ? " forced=true" : "") +
    (report.finished_after_interrupt
      ? `\ninterrupted after the state was committed: the switch to ${report.to} was finished`
      : "");
  if (!report.forced) return line;
  const changed = [
    ...check.changed.map((path) => `  changed ${path}`),
    ...check.missing.map((path) => `  missing ${path}`),
    ...check.added.map((path) => `  added ${path}`),
  ];
  return [
    line,
    `release ${report.to} had changed since it was committed; --force switched to it as it is:`,
    ...changed,
  ].join("\n");
}
