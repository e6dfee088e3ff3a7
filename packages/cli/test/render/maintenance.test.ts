import type { PruneReport, ReconcileStateReport } from "@distributor/publish";
import { describe, expect, it } from "vitest";
import {
  formatPruneBundleLines,
  formatPruneText,
  formatReconcileStateText,
} from "../../src/render/maintenance.js";

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
  unit: "outputs",
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
  planned_bundles: [],
  deleted_bundles: [],
  preserved_bundles: [],
  state_changed: false,
  warnings: [],
  would_change: true,
  dry_run: true,
};

const day = (n: number) => ({
  bundle_path: `days/0${n}`,
  published_at: `2026-06-0${n}T00:00:00Z`,
  source_id: "reports.day",
  created: `2026-06-0${n}T00:00:00Z`,
  output_count: 2,
  removes_state: true,
});

const pruneBundles: PruneReport = {
  ...prune,
  unit: "bundles",
  checked_count: 3,
  planned_outputs: [
    { path: "days/01/a.txt", updated_at: "2026-06-01T00:00:00Z" },
    { path: "days/01/b.txt", updated_at: "2026-06-01T00:00:00Z" },
    { path: "days/02/a.txt", updated_at: "2026-06-02T00:00:00Z" },
    { path: "days/02/b.txt", updated_at: "2026-06-02T00:00:00Z" },
  ],
  deleted_outputs: [
    { path: "days/01/a.txt", updated_at: "2026-06-01T00:00:00Z" },
    { path: "days/01/b.txt", updated_at: "2026-06-01T00:00:00Z" },
  ],
  planned_bundles: [day(1), day(2)],
  deleted_bundles: [day(1)],
  preserved_bundles: [day(3)],
  failed_bundle: day(2),
  state_changed: true,
  would_change: false,
  dry_run: false,
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

  it("says status=disabled for a disabled policy", () => {
    const disabled = {
      ...prune,
      enabled: false,
      checked_count: 0,
      planned_outputs: [],
      would_change: false,
    };
    expect(formatPruneText(disabled)).toBe(
      "Prune: pipeline=reports destination=archive backend=local root=/srv/reports/archive status=disabled checked=0 planned=0 deleted=0 preserved=0 dry_run=true",
    );
  });

  it("prints bundle counts and one line per planned bundle when pruning bundle paths", () => {
    expect(formatPruneText(pruneBundles)).toBe(
      "Prune: pipeline=reports destination=archive backend=local root=/srv/reports/archive status=changed unit=bundles checked=3 planned=2 deleted=1 preserved=1 planned_outputs=4 deleted_outputs=2 dry_run=false",
    );
    expect(formatPruneBundleLines(pruneBundles)).toEqual([
      "Prune bundle: pipeline=reports destination=archive bundle=days/01 created=2026-06-01T00:00:00Z published_at=2026-06-01T00:00:00Z outputs=2 removes_state=true status=deleted",
      "Prune bundle: pipeline=reports destination=archive bundle=days/02 created=2026-06-02T00:00:00Z published_at=2026-06-02T00:00:00Z outputs=2 removes_state=true status=failed",
    ]);
    expect(formatPruneBundleLines(prune)).toEqual([]);
  });
});
