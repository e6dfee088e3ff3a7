import type { AuditEvent } from "@distributor/publish";
import * as publish from "@distributor/publish";
import type { CommandHandler } from "../../command.js";
import { formatBytes } from "../../render/progress.js";
import type { AuditCommandOptions } from "./options.js";
import { formatAuditText } from "./render.js";

export const auditCommand: CommandHandler<AuditCommandOptions> = async (options, context) => {
  const config = await publish.loadConfig(options.configPath);
  const progress =
    context.io.stderrIsTTY === true && !options.quiet
      ? auditProgress(context.io.stderr)
      : undefined;
  let report: Awaited<ReturnType<typeof publish.audit>>;
  try {
    report = await publish.audit({
      config,
      pipelineIds: options.pipelineIds,
      ...(options.destinationId === undefined ? {} : { destinationId: options.destinationId }),
      releases: options.releases,
      backends: context.backends,
      signal: context.signal,
      ...(progress === undefined ? {} : { onEvent: progress.onEvent }),
    });
  } finally {
    progress?.stop();
  }
  const text = formatAuditText(report);
  if (!report.drift && !report.failed) return { ok: true, result: report, text };
  const failed = report.destinations.filter((d) => d.error !== null);
  const bundles = report.destinations.flatMap((d) => d.bundles);
  // An invalid state records no release: that is its own finding, not a switch left to make.
  const unswitched = bundles.filter(
    (b) => b.state === "valid" && b.release !== null && b.release.recorded !== b.release.current,
  ).length;
  const driftedReleases = bundles.flatMap((b) =>
    (b.release?.releases ?? [])
      .filter((release) => release.status === "drift")
      .map((release) => ({
        ...release,
        live: release.current,
        staged: release.role === "staged",
      })),
  );
  const unsnapshotted = driftedReleases.filter((release) => release.snapshot_missing);
  // Differences in a bundle path a run was part-way through are that run's, not drift to repair.
  const interrupted = bundles.filter((b) => b.interrupted);
  const settled = bundles.filter((b) => !b.interrupted);
  const message = report.drift
    ? driftMessage({
        ...report,
        unswitched,
        driftedReleases: driftedReleases.filter((release) => !release.snapshot_missing),
        unsnapshotted: unsnapshotted.length,
        interrupted: interrupted.length,
        repairable: settled.reduce((sum, b) => sum + b.missing_count + b.changed_count, 0),
      })
    : `${failed.length} destination(s) could not be audited`;
  return {
    ok: false,
    result: report,
    text,
    error: { code: report.drift ? "drift" : (failed[0]?.error?.code ?? "failed"), message },
    diagnostics: [
      ...failed.map(
        (d) => `pipeline ${d.pipeline_id} destination ${d.destination_id}: ${d.error?.message}`,
      ),
      ...(report.drift ? [message] : []),
    ],
  };
};

/** A one-line counter of checked outputs and bytes, redrawn on stderr (a terminal). */
function auditProgress(stderr: { write(chunk: string): unknown }) {
  let outputs = 0;
  let bytes = 0;
  let drawn = 0;
  const draw = () => {
    stderr.write(`\r\x1b[2Kaudit: ${outputs} output(s), ${formatBytes(bytes)} checked`);
  };
  return {
    onEvent(event: AuditEvent) {
      if (event.type !== "output_checked") return;
      outputs += 1;
      bytes += event.size;
      const now = Date.now();
      if (now - drawn >= 100) {
        drawn = now;
        draw();
      }
    },
    stop() {
      if (outputs > 0) stderr.write("\r\x1b[2K");
    },
  };
}

/** What audit found wrong, and what fixes each kind of it. */
function driftMessage(report: {
  missing_count: number;
  changed_count: number;
  invalid_states: number;
  incomplete_count: number;
  leases_without_state: number;
  reupload_needed: boolean;
  /** Bundle paths under `layout: releases` whose `current` is not the release the state records. */
  unswitched: number;
  /** Committed releases whose files changed since they were committed. */
  driftedReleases: readonly { id: string; live: boolean; staged: boolean }[];
  /** Bundle paths whose state carries the audited owner's replacement marker. */
  interrupted: number;
  /** Releases the state records that have no snapshot. */
  unsnapshotted: number;
  /** Missing and changed outputs outside those bundle paths: what `run --repair` restores. */
  repairable: number;
}): string {
  const leases =
    report.leases_without_state === 0
      ? ""
      : `, ${report.leases_without_state} lease(s) where no state is (a first publication under way, or interrupted: the next run recovers it)`;
  const unswitched =
    report.unswitched === 0
      ? ""
      : `, ${report.unswitched} bundle path(s) whose current link is not the release their state records`;
  const releases =
    report.driftedReleases.length === 0
      ? ""
      : `, ${report.driftedReleases.length} release(s) changed since they were committed (${report.driftedReleases.map((r) => r.id).join(", ")})`;
  const unsnapshotted =
    report.unsnapshotted === 0
      ? ""
      : `, ${report.unsnapshotted} release(s) in force without their snapshot`;
  const interrupted =
    report.interrupted === 0
      ? ""
      : `, ${report.interrupted} bundle path(s) where a publication was interrupted`;
  const found = `audit found ${report.missing_count} missing and ${report.changed_count} changed managed output(s), ${report.incomplete_count} output(s) where the records are not the publication of the recorded source, and ${report.invalid_states} invalid state file(s)${leases}${unswitched}${releases}${unsnapshotted}${interrupted}`;
  const fixes: string[] = [];
  if (report.incomplete_count > 0) {
    fixes.push("a plain `distributor run` of the same source completes the publication");
  }
  if (report.unsnapshotted > 0) {
    fixes.push(
      "the next `distributor run` writes the missing snapshot of the release the state records (from the state, which is that release's committed state)",
    );
  }
  if (report.interrupted > 0) {
    fixes.push(
      "a publication was interrupted part-way (the state still carries its marker, and its outputs may differ from the records until it is done): the next `distributor run` of the pipeline completes it",
    );
  }
  if (report.repairable > 0) {
    fixes.push("`distributor run --repair` restores outputs whose bytes drifted");
  }
  if (report.unswitched > 0) {
    fixes.push(
      "the next `distributor run` switches current to the recorded release (a run died between its commit and its switch)",
    );
  }
  if (report.repairable === 0 && report.driftedReleases.some((release) => release.live)) {
    fixes.push(
      "`distributor run --repair` publishes a new release holding the committed bytes of the files that changed in the live one",
    );
  }
  if (report.driftedReleases.some((release) => !release.live && !release.staged)) {
    fixes.push(
      "a changed earlier release is refused by `distributor rollback` (release_drift) unless --force, and goes when releases.keep retires it",
    );
  }
  if (report.driftedReleases.some((release) => release.staged)) {
    fixes.push(
      "a changed staged release is refused by `distributor promote` (release_drift), and a run of its source publishes that source afresh instead: stage the source again with `distributor run --stage` (a fresh release) and promote that one; retention keeps staged releases (all of them, or the newest releases.keep_staged), so it stays until a newer release goes live and releases.keep retires it",
    );
  }
  if (report.invalid_states > 0) {
    fixes.push(
      "`distributor reconcile-state --rebuild` writes a new state (from the source; under layout: releases, from the committed snapshot of the release current links to), unless the state is only larger than the destination's max_state_size (its State line says so): then raise the setting",
    );
  }
  if (report.reupload_needed) {
    fixes.push(
      "the pipeline's source is an HTTP upload, gone after its run: upload the bundle again to restore it",
    );
  }
  return `${found}; ${fixes.join("; ")}`;
}
