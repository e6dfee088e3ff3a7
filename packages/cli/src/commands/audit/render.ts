import type { AuditReport } from "@distributor/publish";
import { summaryLine } from "../../render/text.js";

/**
 * The text of an `audit` report: one `Audit:` line per audited bundle path, one `Incomplete:`
 * line per output the publication in force and the records disagree on, one `Drift:` line per
 * missing or changed output, one `Unmanaged:` line per unmanaged entry, under `layout: releases`
 * one `Release:` line per checked release and a `Drift:` line per file of one that changed since
 * it was committed, and one `Audit failed:` line per destination that could not be audited.
 */
export function formatAuditText(report: AuditReport): string[] {
  const lines: string[] = [];
  for (const destination of report.destinations) {
    const where = [
      ["pipeline", destination.pipeline_id],
      ["destination", destination.destination_id],
    ] as const;
    if (destination.error !== null) {
      lines.push(summaryLine("Audit failed", [...where, ["code", destination.error.code]]));
    }
    for (const { bundle_path, lease } of destination.leases_without_state) {
      lines.push(
        summaryLine("Lease", [
          ...where,
          ["bundle", bundle_path],
          ["state", "none"],
          ["run_id", lease.run_id],
          ["expires_at", lease.expires_at],
        ]),
      );
    }
    for (const bundle of destination.bundles) {
      const status =
        bundle.state === "invalid"
          ? "invalid_state"
          : bundle.interrupted
            ? "interrupted"
            : bundle.missing_count + bundle.changed_count > 0
              ? "drift"
              : bundle.incomplete_count > 0
                ? "incomplete"
                : bundle.release !== null && bundle.release.recorded !== bundle.release.current
                  ? "not_current"
                  : bundle.release?.releases.some((release) => release.status === "drift")
                    ? "release_drift"
                    : "ok";
      lines.push(
        summaryLine("Audit", [
          ...where,
          ["bundle", bundle.bundle_path],
          ["status", status],
          ["checked", bundle.checked_count],
          ["ok", bundle.ok_count],
          ["missing", bundle.missing_count],
          ["changed", bundle.changed_count],
          ["unmanaged", bundle.unmanaged_entries.length],
          ["incomplete", bundle.incomplete_count],
          // Only under layout: releases.
          ...(bundle.release === null
            ? []
            : ([
                ["release", bundle.release.recorded ?? "-"],
                ["current", bundle.release.current ?? "-"],
                // Staged releases, apart from the live and earlier ones.
                ...stagedField(bundle.release.releases),
              ] as const)),
          // Only for a source whose signature its pipeline checked.
          ...(bundle.signer === null
            ? []
            : ([
                ["signer", bundle.signer.principal],
                ["signer_key", bundle.signer.fingerprint],
              ] as const)),
        ]),
      );
      if (bundle.state === "invalid" && bundle.error !== null) {
        // Why the state could not be read: invalid text, or larger than max_state_size.
        lines.push(
          summaryLine("State", [...where, ["bundle", bundle.bundle_path], ["error", bundle.error]]),
        );
      }
      for (const gap of bundle.incomplete) {
        lines.push(
          summaryLine("Incomplete", [
            ...where,
            ["bundle", bundle.bundle_path],
            ["path", gap.path],
            ["status", gap.status],
          ]),
        );
      }
      for (const output of bundle.outputs) {
        if (output.status === "ok") continue;
        lines.push(
          summaryLine("Drift", [
            ...where,
            ["bundle", bundle.bundle_path],
            ["path", output.path],
            ["status", output.status],
          ]),
        );
      }
      for (const release of bundle.release?.releases ?? []) {
        const at = [...where, ["bundle", bundle.bundle_path], ["release", release.id]] as const;
        lines.push(
          summaryLine("Release", [
            ...at,
            ["current", release.current],
            ["status", release.status],
            ["checked", release.method],
            ["changed", release.changed.length],
            ["missing", release.missing.length],
            ["added", release.added.length],
            ...(release.directory_missing ? ([["directory", "missing"]] as const) : []),
            ...(release.snapshot_missing ? ([["snapshot", "missing"]] as const) : []),
          ]),
        );
        const files = [
          ...release.changed.map((path) => [path, "changed"] as const),
          ...release.missing.map((path) => [path, "missing"] as const),
          ...release.added.map((path) => [path, "added"] as const),
        ];
        for (const [path, status] of files) {
          lines.push(summaryLine("Drift", [...at, ["path", path], ["status", status]]));
        }
      }
      for (const entry of bundle.unmanaged_entries) {
        lines.push(
          summaryLine("Unmanaged", [
            ...where,
            ["bundle", bundle.bundle_path],
            ["path", entry.path],
            ["type", entry.type],
          ]),
        );
      }
    }
  }
  return lines;
}

/** `staged=<id>,<id>` when staged releases wait for promotion; nothing otherwise. */
function stagedField(releases: readonly { id: string; role: string }[]) {
  const staged = releases.filter((release) => release.role === "staged").map((r) => r.id);
  return staged.length === 0 ? [] : ([["staged", staged.join(",")]] as const);
}
