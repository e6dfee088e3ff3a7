import type { RunActionReport, RunEvent, RunReport } from "@distributor/publish";
import type { CommandHandler, CommandOutcome, RunCommandOptions } from "../command.js";
import type { TextSink } from "../io.js";
import { summaryLine } from "../render/text.js";
import { cliPackage } from "../version.js";
import { lockTimeoutMs } from "./lock-timeout.js";

export const runCommand: CommandHandler<RunCommandOptions> = async (options, context) => {
  const publish = await import("@distributor/publish");
  const config = await publish.loadConfig(options.configPath);
  const progress = context.io.stderrIsTTY ? progressPrinter(context.io.stderr) : undefined;
  const report = await publish.run({
    config,
    pipelineIds: options.pipelineIds,
    dryRun: options.dryRun,
    force: options.force,
    lockTimeoutMs: lockTimeoutMs(publish.parseDuration, options.lockTimeout),
    distributorVersion: (await cliPackage()).version,
    backends: context.backends,
    signal: context.signal,
    ...(progress ? { onEvent: progress } : {}),
  });
  return runOutcome(report, publish.runSucceeded(report));
};

function runOutcome(report: RunReport, ok: boolean): CommandOutcome {
  const outcome: CommandOutcome = { ok, result: report, text: report.actions.map(actionLine) };
  if (!ok) {
    const diagnostics = [
      ...report.pipeline_errors.map((e) => `pipeline ${e.pipeline_id}: ${e.message}`),
      ...report.actions
        .filter((a) => a.status === "failed")
        .map(
          (a) =>
            `pipeline ${a.pipeline_id} destination ${a.destination_id} bundle ${a.bundle_path || "."}: ${a.error ?? a.reason}`,
        ),
    ];
    const failed = report.actions.filter((a) => a.status === "failed").length;
    const message =
      report.pipeline_errors.length > 0 && failed === 0
        ? (report.pipeline_errors[0]?.message ?? "run failed")
        : `${failed} destination action(s) and ${report.pipeline_errors.length} pipeline(s) failed`;
    outcome.error = { code: report.pipeline_errors[0]?.code ?? "destination_failed", message };
    outcome.diagnostics = diagnostics;
  }
  return outcome;
}

function actionLine(action: RunActionReport): string {
  return summaryLine(undefined, [
    ["pipeline", action.pipeline_id],
    ["destination", action.destination_id],
    ["bundle", action.bundle_path === "" ? "." : action.bundle_path],
    ["source", action.source_id],
    ["action", action.action],
    ["status", action.status],
    ["outputs", action.outputs.length],
    ["primary_url", action.primary_url],
  ]);
}

/** Files and bytes written, redrawn in place on an interactive stderr. */
function progressPrinter(stderr: TextSink): (event: RunEvent) => void {
  let files = 0;
  let bytes = 0;
  return (event) => {
    if (event.type === "output_written") {
      files += 1;
      bytes += event.size;
      stderr.write(
        `\r\u001b[Kpublishing ${event.pipeline_id}/${event.destination_id}: ${files} ${files === 1 ? "file" : "files"}, ${formatBytes(bytes)}`,
      );
    } else if (event.type === "destination_done" && files > 0) {
      stderr.write("\r\u001b[K");
      files = 0;
      bytes = 0;
    }
  };
}

function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}
