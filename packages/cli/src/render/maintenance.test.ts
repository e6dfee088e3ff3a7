import type { PruneReport, ReconcileStateReport } from "@distributor/publish";
import { describe, expect, it } from "vitest";
import { formatPruneText, formatReconcileStateText } from "./maintenance.js";

const reconcile: ReconcileStateReport = {
  pipeline_id: "reports",
  destination_id: "archive",
  backend: "local",
  root_path: "/srv/reports/archive",
  state_schema: 2,
  owner_scope: { pipeline_id: "reports", destination_id: "archive" },
  checked_count: 2,
  missing_managed_outputs: [{ path: "summary.txt", storage_status: "missing" }],
  unmanaged_entries: [
    { path: "empty.txt", type: "file" },
    { path: "extra.txt", type: "file", size: 9 },
  ],
  changed: false,
  would_change: true,
  dry_run: true,
};

const prune: PruneReport = {
  pipeline_id: "reports",
  destination_id: "archive",
  backend: "local",
  root_path: "/srv/reports/archive",
  owner_scope: { pipeline_id: "reports", destination_id: "archive" },
  enabled: true,
  checked_count: 1,
  planned_outputs: [
    {
      path: "archive.txt",
      updated_at: "2026-06-05T12:00:00Z",
      owner: { pipeline_id: "reports", destination_id: "archive" },
    },
  ],
  deleted_outputs: [],
  preserved_outputs: [],
  state_changed: false,
  would_change: true,
  dry_run: true,
};

describe("maintenance text lines", () => {
  it("prints the reference reconcile-state line", () => {
    expect(formatReconcileStateText(reconcile)).toBe(
      "Reconcile state: pipeline=reports destination=archive backend=local root=/srv/reports/archive status=would_change checked=2 missing=1 unmanaged=2 dry_run=true",
    );
    expect(
      formatReconcileStateText({ ...reconcile, changed: true, would_change: false }),
    ).toContain("status=changed");
    expect(formatReconcileStateText({ ...reconcile, would_change: false })).toContain(
      "status=unchanged",
    );
  });

  it("prints the reference prune line", () => {
    expect(formatPruneText(prune)).toBe(
      "Prune: pipeline=reports destination=archive backend=local root=/srv/reports/archive status=would_change checked=1 planned=1 deleted=0 preserved=0 dry_run=true",
    );
    expect(formatPruneText({ ...prune, state_changed: true, would_change: false })).toContain(
      "status=changed",
    );
  });
});
